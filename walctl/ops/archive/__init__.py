"""Archives (file://, s3://): push, follow, list, verify, restore, prune, and heal from them."""

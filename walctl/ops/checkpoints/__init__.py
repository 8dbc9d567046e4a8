"""O_CKPT_V2 checkpoints, the Checkpointer library API, and recovery (checkpoint + log)."""

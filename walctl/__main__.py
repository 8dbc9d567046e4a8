from walctl.cli import main

main()

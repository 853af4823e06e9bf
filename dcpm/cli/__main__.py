from dcpm.cli.main import main

main()

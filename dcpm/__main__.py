"""`python -m dcpm`: the same as the `dcpm` command."""

from dcpm.cli import main

main()

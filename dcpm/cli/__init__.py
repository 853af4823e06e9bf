"""The command line (`dcpm`), a surface on the `Memory` contract: every command talks to the
daemon when one serves the data directory and opens the store itself otherwise."""

"""The command line (`dcpm`), a surface on the `Memory` contract: every command talks to the
daemon when one serves the data directory and opens the store itself otherwise."""

import os

# On its first model Pydantic reads every installed package's metadata to look for plugins, a
# tenth of a short command's time. dcpm's processes load none: plugins instrument models, and
# dcpm sends nothing anywhere but the configured LLM. An operator's own setting wins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

"""gradcli's version, in one place under the layers: the package face, ``gradcli --version`` and
pyproject.toml (a test holds the two equal) read it."""

VERSION = "0.1.0"

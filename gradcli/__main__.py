"""``python -m gradcli`` is the ``gradcli`` command."""

from .cli import main

main()

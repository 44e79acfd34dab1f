"""The expression language: text -> tokens -> syntax tree -> tensors (or SymPy).

``parser.parse`` reads a program; ``program.load`` also accepts files, stdin
and ``file.py:func``; ``evaluate`` runs a tree into gradcli tensors (recording
the graph); ``symbolic`` translates it to SymPy.
"""

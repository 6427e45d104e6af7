"""quantspec's GPU kernels, one package per op (``<op>/__init__.py``: the entry point and its engine choice;
``triton.py`` / ``gluon_*.py``: the engines; ``ref.py``: the pure-torch twin). Contracts: docs/CONTRACTS.md."""

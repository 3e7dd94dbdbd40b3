"""Kernels built from source: the board and flavour descriptions in ``kernel/``, the source
tree, the config merge and the check that every requested option landed."""

"""The kernel stage: a board's kernel built from source (the board and flavour
descriptions in ``kernel/``, the source tree, the config merge and the check that every
requested option landed) or Debian's package (:mod:`.debian`), handed on with kernel.json
(rtlab.artifacts.kernel_info), which only this stage writes; :mod:`.provide` chooses
between building, reusing an earlier pipeline's and Debian's, and stamps kernel.json with
which and why."""

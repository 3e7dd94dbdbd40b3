"""The ground floor: every file that passes between the stages, as a typed attrs class
with its reader, its writer and its format version. Stages import these, never each
other upward (the layers are import-linter contracts in pyproject.toml).

- :mod:`.kernel_info` ``kernel.json``: the kernel stage's kernel for the image stage
- :mod:`.manifest`    the image manifest (``manifest.json`` beside an SD image)
- :mod:`.identity`    a campaign variant's identity, as kernel.json, the manifest and
                      every record carry it
- :mod:`.record`      the result record (``rtlab.result/3``; /1 and /2 migrated on read)
- :mod:`.kconfig`     reading a kernel's ``.config``: its options, its preemption model
"""

"""What every stage knows of the rack's hardware and software sources, below them all.

- :mod:`.boards` the board models: architecture, DTB, console, kernel packages, QEMU
                 machine, and the flavours (std, rt) an image is judged by
- :mod:`.debian` Debian's archive: kernel and userland packages fetched, checked and
                 unpacked (the kernel stage's Debian kernels, the image stage's root file
                 system), ELF and module facts
"""

"""SD card images for the boards, from Debian's packages (or a kernel the build stage
made), for the physical rack, the virtual rack and LAVA alike. The board models and
Debian's archive are :mod:`rtlab.platform`'s, the manifest's format
:mod:`rtlab.artifacts.manifest`'s.

- :mod:`.build`     ``build_image``: the image, its bmap and its manifest, rebuilt only
                    when an input changed
- :mod:`.rootfs`    what the board runs: the initramfs's userland, modules and /init, the
                    kernel and device tree
- :mod:`.sdcard`    the card: partition layout, FAT and ext4 without root, the bmap
- :mod:`.tools`     the host tools' errors and the constant timestamp the others share
- :mod:`.cli`       ``rtlab image build``
"""

"""SD card images for the boards, from Debian's packages (or a kernel the build stage
made), for the physical rack, the virtual rack and LAVA alike.

- :mod:`.boards`    the board models: kernels, device trees, modules, QEMU wiring
- :mod:`.debian`    Debian packages fetched (never installed) and unpacked
- :mod:`.build`     the image, its bmap and its manifest, rebuilt only when an input changed
- :mod:`.manifest`  the manifest beside an image, read strictly
- :mod:`.cli`       ``rtlab image build``
"""

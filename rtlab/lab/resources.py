"""labgrid resources of the virtual rack.

The physical rack uses labgrid's ``USBSDMuxDevice`` and ``USBMassStorage``; those are found
through udev, which a virtual card cannot satisfy. These two resources stand in for them
with the same roles and are exported by a stock ``labgrid-exporter`` as plain resource
entries (the exporter passes unknown classes through unchanged). Clients load this module
through the environment file's ``imports:``.
"""

import attr
from labgrid.factory import target_factory
from labgrid.resource.common import Resource


@target_factory.reg_resource
@attr.s(eq=False)
class VirtualSDMuxDevice(Resource):
    """The control side of a virtual SD mux.

    Args:
        url: the mux's HTTP endpoint on the virtual rack, e.g.
            ``http://127.0.0.1:20480/sdmux/imx6q-01``
    """

    url: str = attr.ib(validator=attr.validators.instance_of(str))


@target_factory.reg_resource
@attr.s(eq=False)
class VirtualMassStorage(Resource):
    """The SD card as the lab host sees it while the mux is in ``host`` mode.

    Like a USB mass-storage device behind a real mux, ``path`` exists only in ``host``
    mode; writing to it in any other mode fails.

    Args:
        path: block device or image file the host writes the SD image to
    """

    path: str = attr.ib(validator=attr.validators.instance_of(str))

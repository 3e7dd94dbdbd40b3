"""The virtual rack: what a lab host exports, emulated on loopback, behind a real labgrid
coordinator and exporter, so that the same env files, strategy and tests run unchanged.

- :mod:`.config`   ``env/vlab.yaml``: boards, ports, outlets
- :mod:`.qemu`     a board's QEMU command line and its bootloader emulation
- :mod:`.serial`   a board's serial line (RFC 2217 for clients, the transcript kept)
- :mod:`.rack`     a board slot: power, SD mux, its QEMU, armed faults
- :mod:`.faults`   the faults a test can inject
- :mod:`.server`   ``rtlab vlab serve``: the HTTP PDU and SD muxes, coordinator, exporter
- :mod:`.control`  start, stop, status, faults from outside
- :mod:`.demo`     ``rtlab demo``: every board × flavour, one table of verdicts
- :mod:`.gitlab`   a stand-in GitLab (merge requests, a repository over Git's HTTP)
- :mod:`.cli`      ``rtlab vlab …`` and ``rtlab demo``
"""

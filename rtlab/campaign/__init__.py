"""A study across kernel variants (``campaigns/*.yaml``): what a fragment, a tick mode or a
driver costs, per board and load.

- :mod:`.spec`    the campaign file: variants, boards, loads, pairs to compare
- :mod:`.stages`  the stages before it looped per variant: kernels, images, test runs
- :mod:`.local`   the whole campaign on this machine's virtual rack
- :mod:`.report`  the variants' tails and shifts, from the store (``rtlab report --campaign``)
- :mod:`.plots`   its figures; :mod:`.page` the page, summary and tables
- :mod:`.cli`     ``rtlab campaign …`` and the report's ``--campaign``

A variant's identity, as kernel.json, the image manifest and every record carry it, is
rtlab.artifacts.identity.
"""

"""``rtlab bisect``: when the gate fails, the commit of the lab repository and the kernel
option that brought the regression, each step decided by measuring on the rack:
:mod:`.search` (the searches), :mod:`.decide` (a step's sequential verdict), :mod:`.points`
(the history and its configurations), :mod:`.testdev` (the virtual rack's test device),
:mod:`.step` (a step's rounds on the places), :mod:`.bisection` (the whole), :mod:`.result`,
:mod:`.page` and :mod:`.publish` (the result, its page, its GitLab note)."""

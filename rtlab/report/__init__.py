"""``rtlab report``: the results store as a self-contained HTML page with PNG figures,
a GitLab metrics file and a markdown summary for a merge-request comment.

    from rtlab.report.build import write_report
    from rtlab.report.selection import Selection
    written = write_report(store, Path("report"), Selection(boards=("imx6q",)))

Modules, one job each: ``selection`` (what a report covers), ``data`` (what to show, from
the store), ``plots`` (matplotlib figures), ``html`` (the page), ``metrics``
(OpenMetrics), ``summary`` (markdown), ``pool`` (work over every core), ``build`` (all of
it into a folder), ``cli`` (the command). A campaign's report is rtlab.campaign's. This
package imports nothing heavy, so that the ``rtlab`` command stays quick to start.
"""

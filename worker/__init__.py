"""``wizard-arena worker``: the clock (``clock``: the deadline sweep of ``deadlines``,
tournaments advanced, ended matches and refits turned into jobs) and the RQ worker that runs
the jobs (``jobs``), on the domain (``service.domain``)."""

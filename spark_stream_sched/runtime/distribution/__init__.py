"""Partition groups and the distribution manager (Liu & Rundensteiner, §3-§6).

Liu & Rundensteiner, *Adapting State-Intensive Non-Blocking Queries over Distributed
Environments* (WPI, 2005), keep a query's state in partition groups and let a *distribution
manager* move groups between machines and push them to disk. Here:

* :mod:`.groups`      -- a row's partition group, a task's groups, a batch cut by group
* :mod:`.loads`       -- what a group reports (``P_s``, results, bytes on disk, ``H``); a push
* :mod:`.policy`      -- the pure policy: distributed adaptation, lazy-disk, active-disk (§5-§6)
* :mod:`.manager`     -- the next micro-batch's group -> task assignment from the last batch's
                         figures (the Spark driver is the distribution manager)
* :mod:`.assignments` -- assignments recorded per batch, so a replay repeats them
"""

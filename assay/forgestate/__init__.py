"""The one read model of the forge: what every reader knows about every brief.

``read_snapshot(forge)`` (``assay.forgestate.source``) fetches once and decodes every
claim, journal, evidence, event, review, status and holdout ref with its owner's decoder
into a ``ForgeSnapshot`` (``assay.forgestate.snapshot``); ``state_of`` and
``evidence_counts`` (``assay.forgestate.briefs``) judge a brief's state and evidence from
it. The board renders it, ``assay status`` prints it, the sweepers plan from it, the desks
and resync read the forge through it: none of them reads refs of its own, and none of them
imports another to get at it.
"""

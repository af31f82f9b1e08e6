"""A profile against a fleet: how many replicas share the users, and the per-replica view of each point.

Why: a profile measures one server's step against its batch, in sequences. Behind a balancer
the users spread over the replicas, so a level of ``u`` users runs about ``u / replicas``
sequences on each. Read with one replica in mind, three things went wrong against two
replicas: the knee probes, chosen in sequences, were sent as that many users (half the
sequences intended, all below the knee: the per-sequence cost came out 18% high); the slot
detector saw 2 users run 1 sequence (each replica's) and called 1 the server's slot limit;
and the decode table put the fleet's tokens/s beside one replica's batch and step (1888
tokens/s at 32 sequences and a 32.5 ms step, where one replica gives 985).

The count is learned as ``loadtest run`` learns it, from each sub-run's analysis
(:func:`loadtest.analysis.fleet.resolve_replicas`: ``target.replicas`` declared, the
replicas named by ``target.metrics.urls`` or Prometheus, or the processes that answered a
balancer's one metrics URL), so the profile and its sub-runs' own tables agree. Against one
server every function here is the identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadtest.analysis.bounds import fleet_replicas

#: How each ``replicas_source`` is said (profile.json's ``replicas_source``, the summary sentence).
HOW_LEARNED = {
    "declared": "declared by target.replicas",
    "metrics": "counted from the replicas' metrics endpoints",
    "processes": "counted from the processes that answered the one metrics URL",
}


@dataclass
class FleetShare:
    """The replicas the profile spreads its users over: 1 until a sub-run (or target.replicas) says more."""

    replicas: int = 1
    #: "declared", "metrics" or "processes" (as summary.json's autoscaling); None: nothing said, taken as 1.
    source: str | None = None
    #: Whether a sub-run has resolved a count yet (a later, different one is worth a note).
    learned: bool = False

    def learn(self, analysis: Any) -> str | None:
        """Take the count a sub-run resolved; a note when it differs from an earlier run's, else None."""
        autoscaling = getattr(analysis, "autoscaling", None)
        count = getattr(autoscaling, "replicas", None)
        if not count:
            return None
        source = getattr(autoscaling, "replicas_source", None)
        before, changed = self.replicas, self.learned and int(count) != self.replicas
        self.replicas, self.source, self.learned = int(count), source, True
        if changed:
            return (f"the replicas changed from {before} to {count} between the profile's sub-runs "
                    f"({HOW_LEARNED.get(source or '', 'taken as given')}); the later runs' users are spread over {count}")
        return None

    def users(self, sequences: list[int]) -> list[int]:
        """The users that put ``sequences`` on each replica: sequences × replicas."""
        return [int(n) * self.replicas for n in sequences]

    def per_replica(self, users: float, replicas: int | None = None) -> float:
        """Users a replica carries at a level of ``users`` (as the slot detector compares them with its batch),
        over ``replicas``, the level's own count (:meth:`at_level`), else the fleet's."""
        return users / (replicas or self.replicas)

    def at_level(self, analysis: Any, level: Any) -> int:
        """The replicas a level ran on: the count its batch was divided by.

        Where a replica's metrics did not answer and the others' gauges held the whole load, the replicas
        that served (:func:`loadtest.analysis.bounds.fleet_replicas`, from
        :mod:`loadtest.analysis.silent_replicas`), else the fleet's. Why one count for a point: its batch
        (:func:`~loadtest.analysis.bounds.running_sequences`) was divided by the serving replicas while its
        tokens/s per replica was divided by the fleet's, so one point read one replica's whole batch beside
        half its throughput.
        """
        return int(fleet_replicas(analysis, level) or self.replicas)

    def tokens_per_s(self, tokens_per_s: float, users: float | None, replicas: int | None = None) -> float:
        """One replica's tokens/s at a level: the endpoint's over the replicas that ran its users.

        ``min(replicas, users)``: one user keeps one replica busy (decode-1), not two; ``replicas`` is the
        level's own count (:meth:`at_level`), else the fleet's.
        """
        if users is None or not math.isfinite(tokens_per_s):
            return tokens_per_s
        return tokens_per_s / max(1, min(replicas or self.replicas, int(round(users))))

    def sentence(self) -> str | None:
        """The summary's first sentence against a fleet (None against one server)."""
        if self.replicas < 2:
            return None
        how = HOW_LEARNED.get(self.source or "", "taken as given")
        return (f"the target is a fleet of {self.replicas} replicas ({how}): the decode ladder and the knee probes "
                f"ran {self.replicas} users for each sequence a replica decodes, so the sequences, steps, knee and "
                "tokens/s per replica here are one replica's (the prefill's one user, and decode-1's, ran on one at a time)")

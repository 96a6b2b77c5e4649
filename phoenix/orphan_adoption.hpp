// phoenix/orphan_adoption.hpp — which orphaned interval (Node::orphaned) a node adopts under orphan_policy
// "adopt". Pure: the node passes what it assumes and what its routing table says.
//
// The node whose interval ends where an orphaned one begins adopts it once its owner has been unreachable for
// `after` (orphan_after_ms: as soon as it is reported). Where nobody's interval ends there (the orphan begins
// at 0, or what lies below is nobody's too), the node whose interval begins where it ends adopts it after twice
// that: a lower neighbour that exists but is not known here yet goes first. After four times the wait it adopts
// whatever lies below: a lower neighbour that has not adopted by then does not know the orphan (an interval
// lost on its way from this node to a taker that crashed is known to this node alone). A node that assumes
// nothing, or several intervals, adopts nothing: the migration protocol needs one interval, and adopting only
// what touches it keeps it one.
//
// Before these rules: what this node gave to a taker that crashed before this node heard it assume it
// (`given_lost`) is adopted by this node, only that part of the lost owner's record (the rest is its
// neighbours'): at once where this node lies below it, after four times the wait where it lies above it or this
// node assumes nothing (a node that gave all it had, or is leaving). The wait leaves the part to a node below it
// that heard the taker assume it before it crashed; where nobody did, only this node knows it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <phoenix/node.hpp>
#include <vector>

namespace phoenix {

// `owned(v)`: some node (this one included) assumes virtual node v, as far as this node's routes say.
std::optional<OrphanedInterval> adoption_for(const std::vector<Interval>& mine,
                                             const std::vector<OrphanedInterval>& orphans,
                                             std::chrono::milliseconds after,
                                             const std::function<bool(vp_t)>& owned,
                                             const std::vector<Interval>& given_lost = {});

}  // namespace phoenix

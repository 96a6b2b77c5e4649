/*
 * migration.pml -- the interval migration protocol of docs/migration.md (the Phoenix paper, section 3.5,
 * Figures 1-3, as phoenix reads and completes them).
 *
 * Over 600 lines as one file: SPIN checks one model, and its handlers, monitors and configurations share the
 * global state below; split, they would be one model in several includes.
 *
 * Line numbers in comments ("line 28") are the lines of the paper's Figures 1-3 as quoted in
 * docs/migration.md; "doc:" names a section of docs/migration.md.
 *
 * Configuration (all by -D on the spin command line, e.g. spin -a -DN=4 migration.pml):
 *   N         nodes (default 3; the LTL properties are written out for N = 3 and 4)
 *   V         virtual nodes, the space [0, V) (default 4, at most 8)
 *   ATTEMPTS  lock attempts each node may begin (default 2); UNBOUNDED: no limit. withdraw is the one message
 *             that nothing answers, so with UNBOUNDED an initiator can keep withdrawing faster than the responder
 *             reads its link, and some link overflows whatever CAP (README.md)
 *   CAP       capacity of each node-to-node channel (default 3)
 *   INIT      initial partition: 0 = node 0 assumes [0, V), the others nothing;
 *             1 (default) = nodes 0 .. N-2 split [0, V) evenly in order, node N-1 assumes nothing;
 *             2 = node 0 assumes nothing, nodes 1 .. N-1 split [0, V); 3 = node 0 assumes [0, 1), node N-1
 *             the rest, the others nothing
 *   NAMES     resource names, which give the total order: 0 (default) = name i for node i,
 *             1 = reversed (name N-1-i), so that the empty node has the smallest name; 2 = rotated (i+1 mod N)
 *   K         how many vnodes a rebalancing take or give moves (default 1)
 *   APPS      application messages, one to each of vnodes APP0 .. APP0+APPS-1 (default 2)
 *   APP0      the first of them (default (V - APPS) / 2: the middle of the space, where intervals meet)
 *   QUERY_INBOX  a query routed to the owner of its vnode waits in that node's inbox and is handled later
 *             (by then the node may have given the vnode, or everything, away); default: routing to the
 *             current owner and the handler of line 20 are one step. A node that closed sends a query for a
 *             vnode it no longer assumes back to the overlay, and with LEASE may drop it as it finalizes
 *             (INBOX_STEP, DROP_STEP)
 *   REORDER   a node takes any message of a link first, not only the oldest (links are FIFO otherwise)
 *   DUP_QUERY (with LEASE) the overlay may deliver one query twice: only the first reply to a query is its
 *             answer, and a node drops a copy of a query it answered. Needs CAP=5
 *   FORGET_ANSWERS  (with DUP_QUERY) a node may forget the queries it answered at any moment (phoenix keeps the
 *             last 64): a copy is still dropped while the grant made for it is held or pending
 *   FORGE     (with LEASE) a key holder forges one cleanup_ack with the number of some node's attempt under way, in
 *             any other node's name, at any moment: only the one from the node its cleanup went to ends anything.
 *             Needs a slot more in the channels (CAP=5)
 *   NO_PRE    do not assert the preconditions of the handlers and of begin() (PRE below), to see which of
 *             the properties proper a seeded bug breaks
 *   FINE_FAIRNESS  one process per ordered pair of nodes handles that link, one process per vnode delivers
 *             to it, so that weak fairness (-f) is fairness among links and among vnodes, not only among
 *             nodes; default: one process per node for its links, one for the whole overlay (fewer
 *             processes, cheaper -f; the same reachable states)
 *   HANDOVER  the queries waiting at the vnodes of T are handed to the taker in the step in which it assumes
 *             T (otherwise they are delivered by the overlay at any later time while somebody assumes the
 *             vnode); for liveness runs with UNBOUNDED, where weak fairness alone lets a query starve at a vnode
 *             that keeps moving (README.md)
 *   FINALIZE  1 (default): a node that assumes nothing and has no attempt of its own may close once
 *             (ph_finalize: a permanent leaver after give all, or a node that never joined) and is gone for good
 *             once nothing involves it any more (doc: leaving in the middle); 0: no node ever closes
 *   TEMP_LEAVE  node TEMP_NODE (default 0) may also close with whatever it assumes, once no attempt of its own
 *             is under way (temporary leave, ph_suspend), and reopen, once, before or after it finalized (its
 *             suspend could not go ahead, or it is back with its intervals)
 *   CRASH     one node may crash at any point (SIGKILL): it takes no step again, what waits in its inbox and
 *             whatever is sent to it later is lost; what it sent before is delivered. Final leaves settlement to
 *             the LTL property live_nodes, which asks it only of the nodes that have not crashed
 *   SLOW      one node may stop taking steps at any point (SIGSTOP) and go on later with its state and inbox
 *   LEASE     doc, decision 8: attempt numbers on every message, a lease that may expire at any moment in the
 *             phases before a release, late state assumed or given back (give_back), refuse for a give_request
 *             whose grant was broken; LEASES (default 1) bounds the expiries that race a partner still able to
 *             answer (one after a crash, or of a lock whose partner finalized, is not counted). Needs CAP=4: an
 *             initiator may abandon attempts faster than replies to them are read
 *   WITNESSES witness points: every handler branch fails an assertion the first time it runs (with pan -c0,
 *             check.sh collects them; see WITNESS)
 *   LIVENESS  compile the LTL properties: settles (every involvement of a node ends; the one check.sh runs; it
 *             implies all the others except quiesce), live (attempts_end and locks_free), attempts_end,
 *             locks_free, invitations_end, finalizes, quiesce; live_nodes (CRASH, SLOW: attempts end and locks
 *             are freed on every node that has not crashed)
 *
 * Seeded bugs (each makes SPIN report an error; check.sh runs them):
 *   BUG_NO_ADJ34            line 34 without the adjacency test
 *   BUG_NO_ADJ54            line 54 without the adjacency test
 *   BUG_NO_I_EQ_S42         line 42 without the test I = S
 *   BUG_TAKER_ASSUMES_EARLY the initiator that takes assumes T when it sends give_request, before the giver
 *                           released T
 *   BUG_INITIATOR_FREES_EARLY the initiator frees its own lock right after its give_request / state(T)
 *   BUG_LINE64_CLEARS_L     line 64 as extracted: the cleanup handler also sets l = false
 *   BUG_LOCK_ORDER          line 23 dropped: a query is granted (line 28) whatever the order of the names.
 *                           Harmless alone, thanks to fail fast; with WAIT_LOCKS it deadlocks
 *   BUG_NO_INVITATIONS      decision 6 without the count: the responder does not count its open invitations, so
 *                           it may finalize while its lock_you_first is unanswered (withdraw is still sent).
 *                           With BUG_NO_WITHDRAW too it is the protocol before decision 6 (the chaos test's bug)
 *   BUG_NO_WITHDRAW         line 39 as in the figures: no withdraw; an invitation stays open for good
 *   BUG_INVITED_FLAG        the invitation as a flag, not a count: a query overtaking the withdraw (or lock2) that
 *                           answered the previous invitation is forgotten (found by PRE; with NO_PRE a lock2
 *                           reaches a node that finalized)
 *   BUG_CLOSE_WHILE_BUSY    a node closes as soon as it assumes nothing, even while an attempt of its own is under
 *                           way (ph_leave returned at once on an empty interval, ph_finalize closed at once): a take
 *                           that completes after the close gives the node that finalizes an interval, lost with it
 *                           (LOST; with PRE the precondition in assume reports it first)
 *   BUG_EMPTY_S_ADJACENT    decision 1 without "an empty S is never adjacent": with QUERY_INBOX a node that gave
 *                           everything away reports [0, 0), which is "adjacent below" to an initiator whose
 *                           interval starts at 0; the empty node grants its lock, closes, and the give brings it
 *                           an interval as it finalizes (LOST)
 *   BUG_LEASE_AFTER_RELEASE (LEASE) the giver takes T back when its lease expires after the release: a slow taker
 *                           assumes T too (disjoint cover)
 *   BUG_DROP_LATE_STATE     (LEASE) a taker that broke its lock drops a late state (and says done): T is lost
 *   BUG_NO_COPY_GUARD       (DUP_QUERY) every reply to a query is taken for its answer, and every copy of a query
 *                           is answered: a second lock_you_first ends an attempt whose own lock is taken, and
 *                           the lock stays taken for good
 *   BUG_NO_HELD_GUARD       (FORGET_ANSWERS) a copy of a query the node forgot it answered is granted again even
 *                           while the first grant is held or pending: a late give_request of the first is taken
 *                           for the second's and releases what does not fit
 *   BUG_ANY_CLEANUP_ACK     (FORGE) any cleanup_ack with the attempt's number ends it, whoever sent it and whether a
 *                           cleanup went out or not: a forged one that comes while the initiator's lock2 is out ends
 *                           the attempt, and the initiator's own lock stays taken for good
 * and a variant of the protocol:
 *   WAIT_LOCKS              no fail fast at line 54: an ok1 that finds the initiator's own lock taken waits
 *                           until it is free instead of answering cleanup (doc: decision 5). Verifies alone:
 *                           the total order is what rules out the deadlock then
 *
 * Abstractions:
 *   - The state of T travels as one message state(T). doc: the transfer streams it as state_begin, chunks and
 *     state_acks; the chunks only add traffic between giver and taker while both locks are held and change
 *     none of the locking logic, so one message stands for the whole stream.
 *   - The steps the implementation runs on the application's thread (the giver's release-and-stream, the
 *     taker's check-unpack-assume-free-done) are taken in the handler of the message that enables them. Both
 *     locks are held from then until they run, so I and T cannot change in between; what can happen in
 *     between (application messages delivered or received, queries answered from the same I) can happen
 *     before the handler just as well. This is also what phoenix does without state handlers (doc: the
 *     transfer, last paragraph).
 *   - Handlers and begin() of one node are mutually excluded (the figure's caption): each is one d_step or
 *     atomic.
 *   - Messages between two nodes travel on a FIFO channel per ordered pair (REORDER: in any order); messages
 *     to a virtual node wait in a per-vnode queue that is delivered only while somebody assumes the vnode, to
 *     whoever assumes it at delivery time (the delivery contract of ph_send).
 *   - The application messages are all sent at the start (see init).
 *   - Nodes do not crash unless CRASH says so. A node may finalize (FINALIZE; doc: leaving in the middle): it closes -- begins no
 *     attempt, answers every query from another node with fail1 and every lock2 with fail2 -- and is gone for
 *     good (GONE) as soon as nothing involves it: no attempt, no lock held or granted, no transfer, no open
 *     invitation (eagerly: ph_finalize stops driving the protocol at that moment). Only a node that assumes
 *     nothing and has no attempt of its own closes (a permanent leaver after give all, or a node that never
 *     joined; with TEMP_LEAVE, one node may also close with its interval and come back with it); it closes
 *     for good at most once, at any time. Messages it sent before are delivered (ph_finalize drains its links); any
 *     message to its name afterwards would be lost, so sending or delivering one is an assertion violation,
 *     independent of PRE. It keeps its process, whose only enabled step is then that failing delivery. A node
 *     that has not closed goes on handling messages to the end.
 *   - Plans: take half is offered only with I empty (ph_join); take K with I empty takes the upper end of S,
 *     like take half; give with I empty yields an empty T (the cleanup path).
 */

#ifndef N
#define N 3
#endif
#ifndef V
#define V 4
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 2
#endif
#ifndef CAP
#define CAP 3
#endif
#ifndef INIT
#define INIT 1
#endif
#ifndef NAMES
#define NAMES 0
#endif
#ifndef APPS
#define APPS 2
#endif
#ifndef APP0
#define APP0 ((V - APPS) / 2)
#endif
#ifndef FINALIZE
#define FINALIZE 1
#endif
#ifndef K
#define K 1
#endif

#define NONE 255

/* preconditions: what each handler and begin() may assume in the protocol as specified (e.g. a reply to an
 * attempt arrives while the attempt is outstanding). Not properties of the protocol themselves, but they
 * catch a broken invariant at the first step that relies on it. */
#ifndef NO_PRE
#define PRE(x) assert(x)
#else
#define PRE(x) skip
#endif

/* resource names: the total order of line 23 / 26 */
#if NAMES == 0
#define RN(i) (i)
#elif NAMES == 1
#define RN(i) (N - 1 - (i))
#else
#define RN(i) (((i) + 1) % N)
#endif

mtype = { lock_you_first, lock2, ok1, ok2, fail1, fail2, cleanup, cleanup_ack, give_request, state, done, withdraw };
#ifdef LEASE
mtype = { refuse, give_back };  /* doc, decision 8 */
#endif

/* ---- Figure 1: the variables of each node (arrays indexed by node) ---- */
bool locked[N];        /* line 2: s, FREE (false) or LOCKED (true) */
byte holder[N];        /* line 3: h, NONE while FREE */
byte lo[N];            /* line 4: I = [lo, hi), half-open; empty is lo = hi = 0 */
byte hi[N];
bool attempting[N];    /* line 5: l */

/* the attempt in progress (doc: plan), kept by its initiator; reset to 0 once it no longer matters */
#define P_NONE      0
#define TAKE_HALF   1  /* ph_join (I empty): the upper half of q's interval, [m, b_q), m = a_q + ceil(|S|/2) */
#define TAKE_K      2  /* rebalancing: the K vnodes of q's interval next to p's (at most all but one) */
#define GIVE_K      3  /* rebalancing: the K vnodes of p's interval next to q's (all of it, if no more) */
#define GIVE_ALL    4  /* ph_leave: all of p's interval */
#define S_ANY       0  /* I empty: query to any vnode (line 10) */
#define S_BELOW     1  /* query to a - 1 (line 13) */
#define S_ABOVE     2  /* query to b (line 16) */
byte plan[N];
byte side[N];
byte partner[N];       /* q, once the exchange knows it */
byte slo[N];           /* S = I_q as reported (line 28) or checked (line 42) */
byte shi[N];
#ifndef UNBOUNDED
byte tries[N];         /* attempts this node may still begin */
#endif

/* what a node waits for after both locks are held */
#define PH_IDLE     0
#define PH_CLEANING 1  /* initiator, T empty: frees its lock on cleanup_ack */
#define PH_TAKING   2  /* taker: waits for state(T) */
#define PH_GIVING   3  /* giver: released T, waits for done(T) */
byte phase[N];

/* doc, decision 6 and "leaving in the middle" */
byte invited[N * N];   /* invited[r * N + q]: lock_you_first sent by r to q and not yet answered (lock2, withdraw) */
#define INV(r, q) invited[(r) * N + (q)]
bool closing[N];       /* close(): the node is about to finalize (FINALIZE) */
#ifdef TEMP_LEAVE
bool temporary[N];     /* it closed with whatever it assumes, to come back with it (ph_suspend, temporary leave) */
bool reopened[N];      /* it came back (or its suspend could not go ahead): reopen(), at most once */
#define TEMPORARY(i) temporary[i]
#else
#define TEMPORARY(i) false
#endif

/* CRASH: one node may crash at any point: it takes no step again, its inbox is never read, messages to it are
 * lost. SLOW: one node may stop taking steps for a while (SIGSTOP) and then go on with its state and inbox.
 * RUNS(i): node i takes steps (its handlers, begin, the overlay's deliveries to it). */
#ifdef CRASH
bool crashed[N];
bool crash_used;       /* at most one crash in a run */
#define CRASHED(i) crashed[i]
#else
#define CRASHED(i) false
#endif
#ifdef SLOW
bool stopped[N];
bool stop_used;        /* at most one stop in a run */
#define STOPPED(i) stopped[i]
#else
#define STOPPED(i) false
#endif
#define RUNS(i) (!CRASHED(i) && !STOPPED(i))

/* LEASE (doc, decision 8): every message of an attempt carries its number, NUM = initiator * ATTEMPTS + the
 * initiator's tries[] left after begin, unique in a run (a query carries only that: its sender is NUM / ATTEMPTS).
 * A lease may expire at any moment (stronger than "only while the partner is slow"), before anything is released:
 * the own attempt before both locks are held or with nothing to move, a take after give_request (leaving a pending
 * take), a granted lock not yet used for a release (leaving a pending grant), open invitations. */
#ifdef LEASE
#ifdef UNBOUNDED
#error LEASE numbers attempts by what tries[] has left
#endif
#define NUM(i) ((i) * ATTEMPTS + tries[i])
#define BIT(n) (1 << (n))
byte gnum[N];      /* the number of the attempt a granted lock belongs to (locked, holder != i) */
byte xpart[N];     /* the partner of a transfer under way (phase PH_TAKING or PH_GIVING) */
byte broken[N];    /* bit n: node i broke its lock of attempt n (a grant, or its own take after give_request), and
                    * a state for attempt n may still come: the pending grants and takes */
#define PENDING(i) (broken[i] != 0)
byte bpart[N];     /* the giver of node i's own take broken by its lease (its pending take's partner) */
#ifndef LEASES
#define LEASES 1       /* lease expiries in a run, each at any moment (the state space grows about 20-fold unbounded) */
#endif
byte expiries;
#ifdef QUERY_INBOX
bool qlost[N];     /* the query of node i's attempt under way was dropped by a node that finalized (DROP_STEP) */
#define QLOST(me) (attempting[me] && qlost[me])
#else
#define QLOST(me) false
#endif
/* the budget bounds the expiries that race a partner still able to answer (the slow partner). An expiry after a
 * crash, or of a grant or invitation whose partner finalized, is the one a lease is for, and is not counted */
#ifdef CRASH
#define NEEDED(me) crash_used
#else
#define NEEDED(me) false
#endif
#define CAN_EXPIRE (expiries < LEASES || NEEDED(me))
#define CAN_EXPIRE_GRANT (CAN_EXPIRE || GONE(holder[me]))
/* a lock2 sent after the responder forgot its invitation on a lease and finalized is lost */
#define CAN_EXPIRE_OWN (CAN_EXPIRE || (attempting[me] && locked[me] && holder[me] == me && GONE(partner[me])) \
                        || QLOST(me))
#define CAN_EXPIRE_INV (CAN_EXPIRE || (INV(me, 0) > 0 && GONE(0)) || (INV(me, 1 % N) > 0 && GONE(1 % N)) \
                        || (N > 2 && INV(me, 2 % N) > 0 && GONE(2 % N)) || (N > 3 && INV(me, 3 % N) > 0 && GONE(3 % N)))
#define EXPIRE if :: expiries < LEASES -> expiries++ :: else -> skip fi
#define GRANT(me) gnum[me] = m_c     /* the grant remembers the attempt it is for */
#define TRANSFER_WITH(me, q) xpart[me] = q
#define MINE(me) (m_c == NUM(me))  /* the message belongs to this node's attempt under way (if any) */
/* Only the first reply to the query of an attempt (lock_you_first, ok1, fail1) is its answer: a second one
 * (DUP_QUERY: the reply to a copy of the query, from the same node or from the node that assumes the vnode by
 * then) is answered as a stale one is, and the cleanup_ack of the cleanup an ok1 copy got ends nothing */
bool replied[N];
#define REPLY_MSG(t) ((t) == lock_you_first || (t) == ok1 || (t) == fail1)
#define REPLIED(me) replied[me] = true
#ifndef BUG_NO_COPY_GUARD
#define QUERY_CURRENT(me) (attempting[me] && MINE(me) && !replied[me])
#define COPY_REPLY(me, q) (REPLY_MSG(m_t) && replied[me])
#else
#define QUERY_CURRENT(me) (attempting[me] && MINE(me))
#define COPY_REPLY(me, q) false
#endif
/* 1 + the node the cleanup of the attempt under way went to (line 58, or T empty), until it acknowledges it; 0:
 * none. Only its cleanup_ack ends the attempt: the one a copy's ok1 led to ends nothing, and neither does one a
 * key holder forged (FORGE) */
byte cto[N];
#define CLEAN_WITH(me, q) cto[me] = (q) + 1
#ifndef BUG_ANY_CLEANUP_ACK
#define CLEANED(me, q) (cto[me] == (q) + 1)
#else
#define CLEANED(me, q) true
#endif
#else
#define QUERY_CURRENT(me) true
#define REPLIED(me) skip
#define CLEAN_WITH(me, q) skip
#define PENDING(i) false
#define GRANT(me) skip
#define TRANSFER_WITH(me, q) skip
#endif

/* DUP_QUERY (with LEASE): the overlay may deliver one query twice, the copy after the queries queued behind it. A
 * query to a virtual node is not numbered end to end, and a link that finds a new incarnation at the address it
 * dialled sends again what the old one never acknowledged, though the old one may have passed it on. */
#ifdef DUP_QUERY
#ifndef LEASE
#error DUP_QUERY needs LEASE: attempt numbers tell the replies of one attempt from those of another
#endif
bool duplicated;
/* bit n: this node answered the query of attempt n (phoenix keeps the last queries it answered): a copy of one
 * is dropped. A copy that reaches the node that answered it once would otherwise be granted again, under the
 * same attempt number, and messages of the first grant (a give_request late on its link) taken for the second's.
 * Only with DUP_QUERY: without copies no query comes twice, and the record would only tell states apart.
 * phoenix keeps a bounded record, so it may have forgotten the query by the time its copy comes (FORGET_ANSWERS:
 * a node forgets what it answered, at any moment); then the copy is dropped all the same while the grant it
 * made is held or pending (HELD_FOR), and otherwise answered again: the initiator takes that reply for a copy's
 * or a stale one (BUG_NO_HELD_GUARD: no HELD_FOR) */
byte answered[N];
#ifndef BUG_NO_COPY_GUARD
#define ANSWERED(me) (answered[me] & BIT(m_c))
#else
#define ANSWERED(me) false
#endif
#if !defined(BUG_NO_COPY_GUARD) && !defined(BUG_NO_HELD_GUARD)
#define HELD_FOR(me, q) ((broken[me] & BIT(m_c)) || (locked[me] && holder[me] == (q) && gnum[me] == m_c))
#else
#define HELD_FOR(me, q) false
#endif
#define ANSWER(me) answered[me] = answered[me] | BIT(m_c)
#define DUPLICATE(on, v) \
  :: d_step { (on && !duplicated && nempty(vq[v]) && nfull(vq[v])) -> \
              vq[v]?<m_i>; vq[v]!m_i; inflight[m_i / ATTEMPTS]++; duplicated = true; m_i = 0 }
#ifdef FORGET_ANSWERS
#define FORGET_STEP(me) :: d_step { (RUNS(me) && answered[me] != 0) -> WITNESS(67); answered[me] = 0 }
#endif
#else
#define DUPLICATE(on, v)
#define ANSWERED(me) false
#define HELD_FOR(me, q) false
#define ANSWER(me) skip
#endif
#ifndef FORGET_STEP
#define FORGET_STEP(me)
#endif

/* ghost state, for the properties only (functions of the rest, so they add no states) */
byte tr_lo[N];         /* T released by node i and not yet assumed by the taker ("in transit") */
byte tr_hi[N];
byte lost_lo[N];       /* CRASH with LEASE: T node i released to a taker that crashed before it assumed it */
byte lost_hi[N];
byte inflight[N];      /* messages of node i's own attempt in flight: its query, replies to it */

/* ---- messages ---- */
/* FIFO per ordered pair of distinct nodes: LINK(from, to) */
#ifdef LEASE
chan link[N * (N - 1)] = [CAP] of { mtype, byte, byte, byte };  /* and the attempt's number */
#define NUMF , m_c
#else
chan link[N * (N - 1)] = [CAP] of { mtype, byte, byte };
#define NUMF
#endif
#define LINK(f, t) link[(f) * (N - 1) + ((t) < (f) -> (t) : (t) - 1)]
#ifdef LEASE
chan vq[V] = [N * ATTEMPTS] of { byte };  /* queries waiting at a virtual node (NUM); abandoned ones stay queued */
#else
chan vq[V] = [N] of { byte };                       /* queries waiting at a virtual node (sender) */
#endif
#ifdef QUERY_INBOX
/* queries routed to node i and not yet handled: the query (as in vq) and its virtual node */
#ifdef LEASE
chan qin[N] = [N * ATTEMPTS] of { byte, byte };
#else
chan qin[N] = [N] of { byte, byte };
#endif
#endif

/* application messages to virtual nodes: pend[v] wait in the overlay at v, held[v] are queued at the node
 * that assumes v and not yet received, delivered[v] were received by the application */
byte pend[V];
byte held[V];
byte delivered[V];

/* scratch variables of the d_steps (not part of the state) */
hidden mtype m_t;
hidden byte m_a, m_b, m_i, m_j, m_k, m_n, m_o, m_tlo, m_thi;
hidden byte m_c;  /* LEASE: the number of the attempt the message being handled belongs to; replies carry it */
/* the addressee has finalized; a node has an invitation open (named, so that the assertions read as what they
 * check) */
hidden byte to_gone, invitation_open, lost;
hidden byte m_copy;  /* LEASE: the message is a second reply to one query (a copy's), or the cleanup_ack it led to */

/* witness points (-DWITNESSES, with pan -c0): each branch of a handler that the correct model is meant to reach
 * fails an assertion the first time it runs in the whole search (seen[] is hidden, so not restored on
 * backtracking): check.sh requires every witness to be reported by some run, so a branch that no
 * configuration reaches is found (dead code, or a configuration missing from check.sh). The message reads
 * "assertion violated (n==0)" for witness n. Without WITNESSES they are skip and change nothing. */
#ifdef WITNESSES
hidden byte seen[72];
#define WITNESS(n) if :: !seen[n] -> seen[n] = 1; assert(n == 0) :: else -> skip fi
#else
#define WITNESS(n) skip
#endif

#define OWNS(i, v)  (lo[i] <= (v) && (v) < hi[i])
#define EMPTY(i)    (lo[i] == hi[i])

/* lock_protocol::involved(): everything that needs node i to stay -- an attempt of its own, a lock it holds or
 * granted, a transfer, an open invitation (unrolled up to 6 nodes; INV(i, i) stays 0) */
#define INVITED(i) (INV(i, 0) > 0 || INV(i, 1 % N) > 0 || (N > 2 && INV(i, 2 % N) > 0) \
                    || (N > 3 && INV(i, 3 % N) > 0) || (N > 4 && INV(i, 4 % N) > 0) || (N > 5 && INV(i, 5 % N) > 0))
#define INVOLVED(i) (attempting[i] || locked[i] || phase[i] != PH_IDLE || INVITED(i) || PENDING(i))
/* lock_protocol::busy(): an attempt of node i's own is under way (l, or its own lock held for a transfer) */
#define BUSY(i) (attempting[i] || (locked[i] && holder[i] == (i)))
/* node i has finalized: it closed and nothing needs it any more (ph_finalize waits for exactly that, then the
 * node is gone for good and whatever is addressed to its name is lost). A function of the state: nothing can
 * involve a closed node again except a message to it, which is itself the error the model looks for. With
 * QUERY_INBOX its inbox is empty too: ph_finalize drains what it holds for virtual nodes (INBOX_STEP). */
#ifdef QUERY_INBOX
/* len(), not empty(): SPIN takes neither !empty() nor empty() beside an else (the LEASE handlers have both) */
#define GONE(i) (closing[i] && !INVOLVED(i) && len(qin[i]) == 0)
#define NOT_GONE(i) (!GONE(i))
#else
#define GONE(i) (closing[i] && !INVOLVED(i))
#define NOT_GONE(i) (!GONE(i))
#endif
/* the monitor of the leave fault: node i finalized for good (not a temporary leave) and owns something, which
 * is lost with it. Checked after every step of a node (the end of check_node), since a node's own steps are the
 * only ones that make it GONE or change what it owns */
#define LOST(i) (GONE(i) && !TEMPORARY(i) && !EMPTY(i))
/* node i takes part: it has not finalized for a temporary leave (TEMP_LEAVE) */
#ifdef TEMP_LEAVE
#define PRESENT(i) (NOT_GONE(i) && RUNS(i))
#else
#define PRESENT(i) RUNS(i)
#endif
/* someone present assumes v (unrolled up to 6 nodes; the % keeps indices in range) */
#define OWNED_PRESENT(v) ((OWNS(0, v) && PRESENT(0)) || (OWNS(1 % N, v) && PRESENT(1 % N)) \
                          || (N > 2 && OWNS(2 % N, v) && PRESENT(2 % N)) \
                          || (N > 3 && OWNS(3 % N, v) && PRESENT(3 % N)) \
                          || (N > 4 && OWNS(4 % N, v) && PRESENT(4 % N)) \
                          || (N > 5 && OWNS(5 % N, v) && PRESENT(5 % N)))

/* the one node that assumes v, in m_o (NONE if nobody) */
inline owner_of(v) {
  m_o = 0;
  do
  :: m_o < N && !OWNS(m_o, v) -> m_o++
  :: m_o >= N -> m_o = NONE; break
  :: else -> break
  od
}

/* replies to the initiator of an attempt (plus cleanup_ack, which also ends it) */
#define ATTEMPT_MSG(t) ((t) == lock_you_first || (t) == ok1 || (t) == fail1 || (t) == ok2 || (t) == fail2 \
                        || (t) == cleanup_ack)

/* every send checks for room first, so that a channel that fills up is an error, not a silent block */
/* LEASE: a node that abandoned an attempt on a lease may have finalized when a late reply to it comes; that is
 * lost, as it is in phoenix. Never T itself or its answer: a node with a transfer or a pending grant or take for
 * it is involved, so it has not finalized (asserted) */
#ifdef LEASE
#define LOST_TO_GONE(to, t) (GONE(to) && (t) != state && (t) != give_back && (t) != done)
#else
#define LOST_TO_GONE(to, t) false
#endif
inline send(from, to, t, a, b) {
  if
  :: CRASHED(to) -> skip  /* CRASH: lost */
  :: LOST_TO_GONE(to, t) -> WITNESS(49)
  :: else ->
     to_gone = GONE(to); assert(!to_gone);  /* nothing is sent to a node that finalized (it would be lost) */
     assert(nfull(LINK(from, to)));
     LINK(from, to)!t, a, b NUMF;
     if
     :: ATTEMPT_MSG(t) -> inflight[to]++
     :: else -> skip
     fi
  fi
}

/* FORGE (with LEASE): a key holder forges one cleanup_ack. It carries the number of the attempt under way at node
 * me (a query shows its number, and an incarnation numbers its attempts in sequence) and names any other node q as
 * its sender (the source of a packet is not authenticated end to end: docs/security.md). Only a cleanup_ack from
 * the node a cleanup of the attempt went to, not yet acknowledged, ends anything; one forged in its name ends the
 * attempt early, and that node frees its lock on the cleanup all the same. BUG_ANY_CLEANUP_ACK: any cleanup_ack
 * with the attempt's number ends it */
#ifdef FORGE
#ifndef LEASE
#error FORGE needs LEASE: a forged message carries the number of the attempt it would end
#endif
bool forged;
#define FORGE_ACK(me, q) \
  :: d_step { ((me) < N && (q) < N && (me) != (q) && !forged && RUNS((me) % N) && \
               (attempting[(me) % N] || phase[(me) % N] == PH_CLEANING) && nfull(LINK((q) % N, (me) % N))) -> \
              forged = true; WITNESS(66); \
              LINK((q) % N, (me) % N)!cleanup_ack, 0, 0, NUM((me) % N); inflight[(me) % N]++ }
proctype Forger() {
end:
  do
  FORGE_ACK(0, 1) FORGE_ACK(0, 2) FORGE_ACK(0, 3) FORGE_ACK(1, 0) FORGE_ACK(1, 2) FORGE_ACK(1, 3)
  FORGE_ACK(2, 0) FORGE_ACK(2, 1) FORGE_ACK(2, 3) FORGE_ACK(3, 0) FORGE_ACK(3, 1) FORGE_ACK(3, 2)
  od
}
#endif

/* ---- disjoint cover: every vnode is assumed by exactly one node that has not finalized for good, or is in
 * transit in exactly one T ---- */
inline check_cover() {
  m_k = 0;
  do
  :: m_k < V ->
     m_n = 0; m_j = 0;
     do
     :: m_j < N ->
        /* a node that finalized for good owns nothing any more: what it assumed is lost, not owned */
        to_gone = GONE(m_j) && !TEMPORARY(m_j);
        if :: OWNS(m_j, m_k) && !to_gone -> m_n++ :: else -> skip fi;
        if :: tr_lo[m_j] <= m_k && m_k < tr_hi[m_j] -> m_n++ :: else -> skip fi;
        if :: lost_lo[m_j] <= m_k && m_k < lost_hi[m_j] -> m_n++ :: else -> skip fi;
        m_j++
     :: else -> break
     od;
     assert(m_n == 1);
     m_k++
  :: else -> break
  od
}

/* the monitor, after every step of node me that can make it GONE or change what it owns */
inline check_node(me) {
  lost = LOST(me); assert(!lost)  /* a node that finalized for good owns nothing (else it is lost with it) */
}

/* ---- ownership changes (ph_release, ph_assume) ---- */

/* giver me releases T = [m_tlo, m_thi): T is one end of I (or all of it) */
inline release(me) {
  assert(m_tlo < m_thi && lo[me] <= m_tlo && m_thi <= hi[me] && (m_tlo == lo[me] || m_thi == hi[me]));
  if
  :: m_tlo == lo[me] -> lo[me] = m_thi
  :: else -> hi[me] = m_tlo
  fi;
  if :: lo[me] == hi[me] -> lo[me] = 0; hi[me] = 0 :: else -> skip fi;
  tr_lo[me] = m_tlo; tr_hi[me] = m_thi;
  /* ph_release: messages for T queued here and not yet received go back into the overlay */
  m_k = m_tlo;
  do
  :: m_k < m_thi -> pend[m_k] = pend[m_k] + held[m_k]; held[m_k] = 0; m_k++
  :: else -> break
  od;
  check_cover()
}

/* taker me assumes T = [m_tlo, m_thi), released by node g */
inline assume(me, g) {
  /* a node that closed for good (with I empty and no attempt of its own) assumes nothing again: a give reaches
   * only a node that reported a non-empty S. The loss itself is what the monitor (LOST) checks */
  PRE(!closing[me] || TEMPORARY(me));
  /* the paper's assertion (doc: the transfer): T arrives adjacent to the taker's interval, or that is empty */
  assert(EMPTY(me) || m_thi == lo[me] || m_tlo == hi[me]);
  if
  :: EMPTY(me) -> lo[me] = m_tlo; hi[me] = m_thi
  :: m_thi == lo[me] -> lo[me] = m_tlo
  :: else -> hi[me] = m_thi
  fi;
  if :: tr_lo[g] == m_tlo && tr_hi[g] == m_thi -> tr_lo[g] = 0; tr_hi[g] = 0 :: else -> skip fi;
  check_cover()
}

inline free_lock(me) {
  locked[me] = false; holder[me] = NONE
}

/* the attempt of me has ended: forget its context */
inline end_attempt(me) {
  plan[me] = P_NONE; side[me] = S_ANY; partner[me] = 0; slo[me] = 0; shi[me] = 0;
#ifdef LEASE
  replied[me] = false;
#endif
  skip
}

/* doc, decision 1: "S and I are adjacent as intended" (lines 34, 54). An empty S is never adjacent; with I
 * empty any non-empty S is; otherwise on the side the query was sent to. */
#ifndef BUG_EMPTY_S_ADJACENT
#define ADJACENT(me, a, b) ((a) < (b) && (EMPTY(me) || (side[me] == S_BELOW && (b) == lo[me]) \
                                                    || (side[me] == S_ABOVE && (a) == hi[me])))
#else
#define ADJACENT(me, a, b) (EMPTY(me) || (side[me] == S_BELOW && (b) == lo[me]) \
                                      || (side[me] == S_ABOVE && (a) == hi[me]))
#endif

/* ---- doc: the transfer (after line 56 or 62). The initiator me holds both locks. ---- */
inline transfer(me) {
  m_n = shi[me] - slo[me];   /* |S| */
  m_k = hi[me] - lo[me];     /* |I| */
  m_tlo = 0; m_thi = 0;
  if
  :: plan[me] == TAKE_HALF ->
     m_tlo = slo[me] + (m_n + 1) / 2; m_thi = shi[me]
  :: plan[me] == TAKE_K ->
     if :: m_n > K -> m_j = K :: m_n <= K && m_n > 0 -> m_j = m_n - 1 :: else -> m_j = 0 fi;  /* all but one at most */
     if
     :: side[me] == S_ABOVE -> m_tlo = slo[me]; m_thi = slo[me] + m_j
     :: else -> m_tlo = shi[me] - m_j; m_thi = shi[me]  /* below, or any: the upper end */
     fi
  :: plan[me] == GIVE_K || plan[me] == GIVE_ALL ->
     if :: plan[me] == GIVE_K && m_k > K -> m_j = K :: else -> m_j = m_k fi;
     if
     :: side[me] == S_BELOW -> m_tlo = lo[me]; m_thi = lo[me] + m_j
     :: else -> m_tlo = hi[me] - m_j; m_thi = hi[me]
     fi
  :: else -> skip  /* no plan (only reachable with a seeded bug): T empty */
  fi;
  if
  :: m_tlo == m_thi ->
     /* T empty: end without moving anything; free the own lock on cleanup_ack */
     WITNESS(1);
     phase[me] = PH_CLEANING; CLEAN_WITH(me, partner[me]);
     send(me, partner[me], cleanup, 0, 0)
  :: m_tlo < m_thi && (plan[me] == TAKE_HALF || plan[me] == TAKE_K) ->
     /* p takes: ask q to give T */
     if :: plan[me] == TAKE_HALF -> WITNESS(2) :: else -> WITNESS(3) fi;
     if :: m_thi - m_tlo > 1 -> WITNESS(4) :: else -> skip fi;  /* more than one vnode moves */
     phase[me] = PH_TAKING; TRANSFER_WITH(me, partner[me]);
     send(me, partner[me], give_request, m_tlo, m_thi);
#ifdef BUG_TAKER_ASSUMES_EARLY
     assume(me, partner[me]);
#endif
#ifdef BUG_INITIATOR_FREES_EARLY
     free_lock(me);
#endif
     skip
  :: m_tlo < m_thi && (plan[me] == GIVE_K || plan[me] == GIVE_ALL) ->
     /* p gives: release T, stream its state */
     if :: plan[me] == GIVE_ALL -> WITNESS(5) :: else -> WITNESS(6) fi;
     if :: plan[me] == GIVE_K && m_thi - m_tlo > 1 -> WITNESS(34) :: else -> skip fi;  /* K > 1 vnodes given */
     release(me);
     phase[me] = PH_GIVING; TRANSFER_WITH(me, partner[me]);
     send(me, partner[me], state, m_tlo, m_thi);
#ifdef BUG_INITIATOR_FREES_EARLY
     free_lock(me);
#endif
     skip
  fi;
  end_attempt(me)
}

/* ---- Figure 3: message handlers; me = p (receiver), q = sender ---- */


/* line 20 */
inline on_query(me, q) {
  inflight[q]--;
  /* the sides of Figure 2 (witnessed here: begin() is atomic, and only a d_step leaves seen[] set) */
  if :: side[q] == S_ANY -> WITNESS(35) :: side[q] == S_BELOW -> WITNESS(36) :: else -> WITNESS(37) fi;
  if
  :: q == me && QUERY_CURRENT(me) ->
     /* line 22: the query came back to its sender */
     WITNESS(7);
     attempting[me] = false; end_attempt(me)
  :: q == me && !QUERY_CURRENT(me) ->
     /* LEASE: the query of an attempt its lease ended came back, or a copy of one already answered: it ends
      * nothing (the node may be in a new one) */
     WITNESS(58)
  :: q != me && ANSWERED(me) ->
     /* DUP_QUERY: a copy of a query this node answered (first: the options of a d_step go in order) */
     WITNESS(65)
  :: q != me && !ANSWERED(me) && HELD_FOR(me, q) ->
     /* FORGET_ANSWERS: this node forgot it answered the query, but the grant it made for it is held or pending */
     WITNESS(68)
  :: q != me && closing[me] ->
     /* doc: leaving in the middle: a closing node answers every query with fail1, whatever the order */
     WITNESS(8);
     send(me, q, fail1, 0, 0)
#ifndef BUG_LOCK_ORDER
  :: q != me && !closing[me] && RN(q) < RN(me) ->
     /* line 25: the sender q must lock itself before p; decision 6: an invitation open until q answers it */
#if defined(BUG_INVITED_FLAG)
     INV(me, q) = 1;
#elif !defined(BUG_NO_INVITATIONS)
     INV(me, q)++;
#endif
     WITNESS(9);
     send(me, q, lock_you_first, lo[me], hi[me])
  :: q != me && !closing[me] && RN(me) < RN(q) && !locked[me] ->
#else
  :: q != me && !closing[me] && !locked[me] ->
#endif
     /* line 28: grant p's lock to q */
     WITNESS(10);
     locked[me] = true; holder[me] = q; GRANT(me); send(me, q, ok1, lo[me], hi[me])
#ifndef BUG_LOCK_ORDER
  :: q != me && !closing[me] && RN(me) < RN(q) && locked[me] ->
#else
  :: q != me && !closing[me] && locked[me] ->
#endif
     /* line 31: p is already locked */
     WITNESS(11);
     send(me, q, fail1, 0, 0)
  fi;
  if :: q != me -> ANSWER(me) :: else -> skip fi
}

/* line 33: lock_you_first(q, S = [a, b)) */
inline on_lock_you_first(me, q, a, b) {
  PRE(attempting[me]);  /* a reply to the own attempt (the node may meanwhile be locked by another) */
  REPLIED(me);
  if
  :: !attempting[me] ->
     /* stale (only reachable without PRE): decision 6, withdrawn all the same */
     send(me, q, withdraw, 0, 0)
#ifndef BUG_NO_ADJ34
  :: attempting[me] && !locked[me] && ADJACENT(me, a, b) ->
#else
  :: attempting[me] && !locked[me] ->
#endif
     /* line 36: lock itself; go ahead to grab the second lock */
     WITNESS(12);
     locked[me] = true; holder[me] = me; partner[me] = q; slo[me] = a; shi[me] = b;
     send(me, q, lock2, a, b)
  :: else ->
     /* line 39: the attempt failed; decision 6: q stops waiting for a lock2 */
     WITNESS(13);
     if :: a == b -> WITNESS(14) :: else -> skip fi;  /* an empty S (QUERY_INBOX) */
     attempting[me] = false; end_attempt(me);
#ifndef BUG_NO_WITHDRAW
     send(me, q, withdraw, 0, 0);
#endif
     skip
  fi
}

/* decision 6: a lock2 or withdraw from q answers one lock_you_first sent to q (the implementation warns about
 * one that answers none and changes nothing) */
inline answered_invitation(me, q) {
#ifndef BUG_NO_INVITATIONS
#ifndef LEASE
  PRE(INV(me, q) > 0);
#endif
  if :: INV(me, q) > 0 -> INV(me, q)-- :: else -> skip fi
#else
  skip
#endif
}

/* decision 6: withdraw(q): q will not send lock2 */
inline on_withdraw(me, q) {
  WITNESS(33);
  answered_invitation(me, q)
}

/* line 41: lock2(q, S = [a, b)) */
inline on_lock2(me, q, a, b) {
  answered_invitation(me, q);
  if
#ifndef BUG_NO_I_EQ_S42
  :: !locked[me] && !closing[me] && lo[me] == a && hi[me] == b ->
#else
  :: !locked[me] && !closing[me] ->
#endif
     /* line 44: grant the lock to q */
     WITNESS(15);
     locked[me] = true; holder[me] = q; GRANT(me); send(me, q, ok2, 0, 0)
  :: closing[me] ->
     /* doc: leaving in the middle: a closing node grants no lock */
     WITNESS(16);
     send(me, q, fail2, 0, 0)
  :: else ->
     /* line 47 */
     WITNESS(17);
     send(me, q, fail2, 0, 0)
  fi
}

/* line 49 */
inline on_fail1(me) {
  PRE(attempting[me]);  /* a reply to the own attempt (the node may meanwhile be locked by another) */
  REPLIED(me);
  WITNESS(18);
  attempting[me] = false; end_attempt(me)
}

/* line 50: failed to get the remote lock; clean up the local state */
inline on_fail2(me) {
  PRE(attempting[me] && locked[me] && holder[me] == me);
  WITNESS(19);
  attempting[me] = false; free_lock(me); end_attempt(me)
}

/* line 53: ok1(q, S = [a, b)) */
inline on_ok1(me, q, a, b) {
  PRE(attempting[me]);  /* a reply to the own attempt (the node may meanwhile be locked by another) */
  REPLIED(me);
#ifndef BUG_NO_ADJ54
  if
  :: !locked[me] && ADJACENT(me, a, b) ->
#else
  if
  :: !locked[me] ->
#endif
     /* line 56: got the first lock remotely and now the second; both held */
     WITNESS(20);
     locked[me] = true; holder[me] = me; attempting[me] = false;
     partner[me] = q; slo[me] = a; shi[me] = b;
     transfer(me)
  :: else ->
     /* line 58 (attempting stays true until cleanup_ack) */
     WITNESS(21);
     if :: a == b -> WITNESS(22) :: else -> skip fi;  /* an empty S (QUERY_INBOX) */
     CLEAN_WITH(me, q);
     send(me, q, cleanup, 0, 0)
  fi
}

/* line 60: got the second remote lock; both held */
inline on_ok2(me, q) {
  PRE(attempting[me] && locked[me] && holder[me] == me && partner[me] == q);
  WITNESS(23);
  attempting[me] = false; partner[me] = q;
  transfer(me)
}

/* line 63: free the lock this node granted at line 28 (doc, decision 2: "s = FREE; h = none") */
inline on_cleanup(me, q) {
  PRE(locked[me] && holder[me] == q);
  WITNESS(24);
  free_lock(me);
#ifdef BUG_LINE64_CLEARS_L
  attempting[me] = false;
#endif
  send(me, q, cleanup_ack, 0, 0)
}

/* line 66 */
inline on_cleanup_ack(me) {
  if
  :: phase[me] == PH_CLEANING ->
     /* doc: the transfer, T empty: the initiator frees its own lock */
     PRE(locked[me] && holder[me] == me);
     WITNESS(25);
     free_lock(me); phase[me] = PH_IDLE
  :: else ->
     /* line 58's cleanup was acknowledged; the own lock was not taken for this attempt (an ok1 or a
      * lock_you_first takes it, and either is the only reply that counts) */
     PRE(attempting[me] && !(locked[me] && holder[me] == me));
     WITNESS(26)
  fi;
#ifdef LEASE
  cto[me] = 0;
#endif
  attempting[me] = false; end_attempt(me)
}

/* doc: the transfer, the giver when the initiator takes */
inline on_give_request(me, q, a, b) {
  PRE(locked[me] && holder[me] == q && phase[me] == PH_IDLE);
  WITNESS(27);
  m_tlo = a; m_thi = b;
  release(me);
  phase[me] = PH_GIVING; TRANSFER_WITH(me, q);
  send(me, q, state, a, b)
}

/* doc: the transfer, the taker once the (last chunk of the) state has arrived: check adjacency, unpack,
 * assume T, free the own lock, send done */
inline on_state(me, q, a, b) {
  PRE(locked[me]);
  m_tlo = a; m_thi = b;
#ifdef BUG_TAKER_ASSUMES_EARLY
  if
  :: phase[me] == PH_TAKING -> /* assumed already */
     if :: tr_lo[q] == a && tr_hi[q] == b -> tr_lo[q] = 0; tr_hi[q] = 0 :: else -> skip fi
  :: else -> assume(me, q)
  fi;
#else
  assume(me, q);
#endif
  if :: holder[me] == me -> WITNESS(28) :: else -> WITNESS(29) fi;  /* the initiator takes, or the responder */
  if :: closing[me] -> WITNESS(30) :: else -> skip fi;  /* a temporary leaver takes what a give brings */
  free_lock(me); phase[me] = PH_IDLE; TRANSFER_WITH(me, 0);
  send(me, q, done, a, b);
#ifdef HANDOVER
  /* the queries that waited for T while nobody assumed it reach the taker now */
  m_j = a;
  do
  :: m_j < b ->
     do
     :: nempty(vq[m_j]) -> vq[m_j]?m_i; DECODE_Q; on_query(me, m_i)
     :: empty(vq[m_j]) -> break
     od;
     m_j++
  :: else -> break
  od;
  m_i = 0; m_j = 0;
#endif
  skip
}

/* doc: the transfer, the giver frees its lock on done */
inline on_done(me) {
  PRE(phase[me] == PH_GIVING);
  if :: holder[me] == me -> WITNESS(31) :: else -> WITNESS(32) fi;  /* the initiator gave, or the responder */
  free_lock(me); phase[me] = PH_IDLE; TRANSFER_WITH(me, 0)
}

#ifdef LEASE
/* doc, decision 8: the message belongs to the attempt or grant this node has now (else to one broken by a lease) */
#define GRANTED(me, q) (locked[me] && holder[me] == q && gnum[me] == m_c && phase[me] == PH_IDLE)
#define CURRENT(me, q) \
  ((m_t == lock_you_first || m_t == ok1 || m_t == fail1 || m_t == ok2 || m_t == fail2) -> (attempting[me] && MINE(me)) : \
   (m_t == cleanup_ack -> ((attempting[me] || phase[me] == PH_CLEANING) && MINE(me) && CLEANED(me, q)) : \
   ((m_t == cleanup || m_t == give_request) -> GRANTED(me, q) : \
   (m_t == state -> ((phase[me] == PH_TAKING && MINE(me)) || GRANTED(me, q)) : \
   (m_t == refuse -> ((phase[me] == PH_TAKING && MINE(me)) || (phase[me] == PH_GIVING && xpart[me] == q)) : \
   ((m_t == done || m_t == give_back) -> (phase[me] == PH_GIVING && xpart[me] == q) : true))))))
#define UNBREAK(me) broken[me] = broken[me] & ~BIT(m_c)

/* a state for an attempt whose lock this node broke: assumed if it can be, else given back (never dropped) */
inline on_late_state(me, q, a, b) {
  m_tlo = a; m_thi = b;
  if
  :: !locked[me] && !closing[me] && (EMPTY(me) || b == lo[me] || a == hi[me]) ->
     WITNESS(48);
#ifdef BUG_DROP_LATE_STATE
     if :: tr_lo[q] == a && tr_hi[q] == b -> tr_lo[q] = 0; tr_hi[q] = 0 :: else -> skip fi;
     check_cover();
#else
     assume(me, q);
#endif
     send(me, q, done, a, b)
  :: else ->
     WITNESS(50);
     send(me, q, give_back, a, b)
  fi
}

#define CLEANING_NOW(me) ((attempting[me] || phase[me] == PH_CLEANING) && MINE(me))
/* a message of an attempt or grant broken by a lease: the partner frees what it holds, nothing moves (the
 * pending record may be gone already if the partner finalized or crashed after sending it: forget_gone) */
inline on_stale(me, q) {
  if
  :: m_t == lock_you_first -> WITNESS(42); send(me, q, withdraw, 0, 0)
  :: m_t == ok1 || m_t == ok2 -> WITNESS(43); send(me, q, cleanup, 0, 0)
  :: m_t == fail1 || m_t == fail2 || (m_t == cleanup_ack && !CLEANING_NOW(me)) -> WITNESS(44)
  :: m_t == cleanup_ack && CLEANING_NOW(me) ->
     /* of the attempt under way, from a node it sent no cleanup to: the cleanup a copy's ok1 got, or forged */
     WITNESS(64)
  :: m_t == cleanup -> PRE((broken[me] & BIT(m_c)) || GONE(q) || CRASHED(q)); WITNESS(45); UNBREAK(me); send(me, q, cleanup_ack, 0, 0)
  :: m_t == give_request -> PRE((broken[me] & BIT(m_c)) || GONE(q) || CRASHED(q)); WITNESS(46); UNBREAK(me); send(me, q, refuse, 0, 0)
  :: m_t == refuse && (broken[me] & BIT(m_c)) -> UNBREAK(me)  /* no witness: needs LEASES=2 (a grant and a take) */
  :: m_t == refuse && !(broken[me] & BIT(m_c)) ->
     /* a taker refused T and crashed, and this giver gave it up meanwhile (partner_gone). No witness: CRASH */
     skip
  :: m_t == state && (broken[me] & BIT(m_c)) -> UNBREAK(me); on_late_state(me, q, m_a, m_b)
  :: m_t == state && !(broken[me] & BIT(m_c)) ->
     /* nothing here expects it any more (the pending record was forgotten: its partner crashed, having sent
      * it first): refused, and the giver takes T back (migration_driver::take_back). No witness: CRASH */
     PRE(CRASHED(q));
     send(me, q, refuse, m_a, m_b)
  :: m_t == done || m_t == give_back ->
     /* the taker's answer, sent before it crashed, after partner_gone freed this giver: ignored (T was given
      * up as lost with it). No witness: CRASH with LEASE */
     skip
  fi
}

/* the taker gave T back: assume it again (the giver's lock kept its interval as it was) */
inline on_give_back(me, q, a, b) {
  PRE(phase[me] == PH_GIVING && xpart[me] == q);
  WITNESS(55);
  m_tlo = a; m_thi = b;
  m_o = me; assume(me, m_o); m_o = 0;
  free_lock(me); phase[me] = PH_IDLE; xpart[me] = 0
}

/* the responder had broken the grant before give_request came: nothing was released */
inline on_refuse(me) {
  PRE(locked[me] && holder[me] == me);
  WITNESS(56);
  free_lock(me); phase[me] = PH_IDLE; xpart[me] = 0
}
/* a second reply to the query of the attempt under way (see replied) */
inline on_copy(me, q) {
  if
  :: m_t == lock_you_first -> WITNESS(61); send(me, q, withdraw, 0, 0)
  :: m_t == ok1 -> WITNESS(62); send(me, q, cleanup, 0, 0)  /* its cleanup_ack is stale (CLEANED) */
  :: m_t == fail1 -> WITNESS(63)
  fi
}

/* ... and, with CRASH, anything a taker sent before it crashed (its done, or T given back) to a giver that gave
 * it up (partner_gone) and then finalized: T was given up as lost with it */
#define LOST_HERE(me) (LOST_TO_GONE(me, m_t) || (GONE(me) && CRASHED(q)))
#else
#define CURRENT(me, q) true
#define LOST_HERE(me) false
#endif

inline handle(me, q) {
  /* the receive path: no message ever reaches a node that finalized (independent of PRE; with LEASE, only a late
   * reply to an attempt it abandoned may, and is lost) */
  if
  :: LOST_HERE(me) -> skip
  :: else -> to_gone = GONE(me); assert(!to_gone)
  fi;
  if
  :: ATTEMPT_MSG(m_t) -> inflight[me]-- 
  :: else -> skip
  fi;
#ifdef LEASE
  m_copy = !LOST_HERE(me) && CURRENT(me, q) && COPY_REPLY(me, q);
#endif
  if
  :: LOST_HERE(me) -> skip
#ifdef LEASE
  :: !LOST_HERE(me) && !CURRENT(me, q) -> on_stale(me, q)
  :: m_copy -> on_copy(me, q)
  :: !LOST_HERE(me) && CURRENT(me, q) && m_t == refuse && phase[me] == PH_GIVING ->
     on_give_back(me, q, m_a, m_b)  /* the taker refused T (see on_stale): taken back, as if given back */
  :: !LOST_HERE(me) && CURRENT(me, q) && m_t == refuse && phase[me] != PH_GIVING -> on_refuse(me)
  :: !LOST_HERE(me) && CURRENT(me, q) && m_t == give_back -> on_give_back(me, q, m_a, m_b)
#endif
  :: else -> skip
  fi;
  if
  :: LOST_HERE(me) || !CURRENT(me, q) -> skip
#ifdef LEASE
  :: m_copy -> m_copy = false
  :: m_t == refuse || m_t == give_back -> skip
#endif
  :: m_t == lock_you_first -> on_lock_you_first(me, q, m_a, m_b)
  :: m_t == lock2          -> on_lock2(me, q, m_a, m_b)
  :: m_t == fail1          -> on_fail1(me)
  :: m_t == fail2          -> on_fail2(me)
  :: m_t == ok1            -> on_ok1(me, q, m_a, m_b)
  :: m_t == ok2            -> on_ok2(me, q)
  :: m_t == cleanup        -> on_cleanup(me, q)
  :: m_t == cleanup_ack    -> on_cleanup_ack(me)
  :: m_t == give_request   -> on_give_request(me, q, m_a, m_b)
  :: m_t == state          -> on_state(me, q, m_a, m_b)
  :: m_t == done           -> on_done(me)
  :: m_t == withdraw       -> on_withdraw(me, q)
  fi;
  check_node(me)
}

/* node dst handles the next message from node src, unless (WAIT_LOCKS) it is an ok1 that finds dst's own lock
 * taken: then it waits at the head of the link. The handlers of a node are mutually excluded, each being one
 * d_step. */
#ifdef WAIT_LOCKS
#define WAITING(src, dst) (LINK(src, dst)?[ok1, _, _] && locked[dst])
#else
#define WAITING(src, dst) false
#endif
#define CAN_HANDLE(src, dst) (nempty(LINK(src, dst)) && !WAITING(src, dst) && RUNS(dst))
#define HANDLE(src, dst) LINK(src, dst)?m_t, m_a, m_b NUMF; handle(dst, src)

/* REORDER: node dst handles any message on the link from src, not only the oldest. Runtime packets
 * (overlay::send_unbounded) are not numbered end to end, so two of them between the same pair of nodes can be
 * reordered when the route changes (docs/overlay.md, "Order"). The k-th message is taken out and the others
 * keep their order (rotated to the tail and back), so that a link's contents stay one state per sequence */
#ifdef REORDER
#ifdef WAIT_LOCKS
#error REORDER: WAIT_LOCKS waits at the head of a link
#endif
#if CAP > 6
#error REORDER takes up to CAP = 6
#endif
hidden mtype r_t;
hidden byte r_a, r_b, r_c, r_n;
#ifdef LEASE
#define RNUMF , r_c
#else
#define RNUMF
#endif
#define ROTATE(src, dst, n) \
  r_n = n; \
  do \
  :: r_n > 0 -> LINK(src, dst)?r_t, r_a, r_b RNUMF; LINK(src, dst)!r_t, r_a, r_b RNUMF; r_n-- \
  :: else -> break \
  od
#define HANDLE_AT(src, dst, k) \
  ROTATE(src, dst, k); LINK(src, dst)?m_t, m_a, m_b NUMF; ROTATE(src, dst, len(LINK(src, dst)) - (k)); \
  r_t = 0; r_a = 0; r_b = 0; r_c = 0; \
  if :: (k) > 0 -> WITNESS(54) :: else -> skip fi;  /* a message overtook an older one */ \
  handle(dst, src)
#define CAN_HANDLE_AT(src, dst, k) (len(LINK(src, dst)) > (k) && RUNS(dst))
#define HANDLE_K(c, src, dst, k) :: d_step { (c && CAN_HANDLE_AT(src, dst, k)) -> HANDLE_AT(src, dst, k) }
/* one option per position a link has (CAP of them: fewer to compile) */
#if CAP > 2
#define HANDLE_K2(c, src, dst) HANDLE_K(c, src, dst, 2)
#else
#define HANDLE_K2(c, src, dst)
#endif
#if CAP > 3
#define HANDLE_K3(c, src, dst) HANDLE_K(c, src, dst, 3)
#else
#define HANDLE_K3(c, src, dst)
#endif
#if CAP > 4
#define HANDLE_K4(c, src, dst) HANDLE_K(c, src, dst, 4)
#else
#define HANDLE_K4(c, src, dst)
#endif
#if CAP > 5
#define HANDLE_K5(c, src, dst) HANDLE_K(c, src, dst, 5)
#else
#define HANDLE_K5(c, src, dst)
#endif
#define HANDLE_ANY(c, src, dst) \
  HANDLE_K(c, src, dst, 0) HANDLE_K(c, src, dst, 1) HANDLE_K2(c, src, dst) HANDLE_K3(c, src, dst) \
  HANDLE_K4(c, src, dst) HANDLE_K5(c, src, dst)
#else
#define HANDLE_ANY(c, src, dst) :: d_step { (c && CAN_HANDLE(src, dst)) -> HANDLE(src, dst) }
#endif

#ifdef FINE_FAIRNESS
/* one process per ordered pair, so that weak fairness applies to each link (the node's I/O context serves all
 * its links in turn) */
proctype Link(byte src; byte dst) {
end:
  do
  HANDLE_ANY(true, src, dst)
  od
}
#else
/* the node's own process handles its links (options unrolled for up to 6 nodes) */
#define RECV(j) HANDLE_ANY(((j) < N && (j) != me), (j) % N, me)
#endif

/* ---- Figure 2: begin an attempt ---- */
#ifndef UNBOUNDED
#define CAN_BEGIN (!locked[me] && !attempting[me] && !closing[me] && tries[me] > 0 && RUNS(me))
#define USE_TRY tries[me]--
#else
#define CAN_BEGIN (!locked[me] && !attempting[me] && !closing[me] && RUNS(me))
#define USE_TRY skip
#endif

#ifdef LEASE
#define QUERY_OF(me) NUM(me)
#define DECODE_Q m_c = m_i; m_i = m_i / ATTEMPTS  /* the sender, and the number its replies carry */
#define BEGIN_PRE(me) PRE(phase[me] == PH_IDLE)  /* replies to an attempt broken by its lease may be in flight */
#else
#define QUERY_OF(me) me
#define DECODE_Q skip
#define BEGIN_PRE(me) PRE(inflight[me] == 0 && phase[me] == PH_IDLE)
#endif
inline begin(me) {
  atomic {
    (CAN_BEGIN && (EMPTY(me) || lo[me] > 0 || hi[me] < V)) ->
    USE_TRY;
    /* "l is true exactly while an own attempt is outstanding": nothing of an earlier attempt is in flight,
     * and no transfer of this node is under way (its lock is free) */
    BEGIN_PRE(me);
    if
    :: EMPTY(me) ->
       /* lines 9-11: I empty: query any virtual node */
       side[me] = S_ANY;
       if :: plan[me] = TAKE_HALF :: plan[me] = TAKE_K :: plan[me] = GIVE_ALL fi;
       select(m_i : 0 .. V - 1)
    :: !EMPTY(me) && lo[me] > 0 ->
       /* lines 12-14: query a - 1 */
       side[me] = S_BELOW; m_i = lo[me] - 1;
       if :: plan[me] = TAKE_K :: plan[me] = GIVE_K :: plan[me] = GIVE_ALL fi
    :: !EMPTY(me) && hi[me] < V ->
       /* lines 15-17: query b */
       side[me] = S_ABOVE; m_i = hi[me];
       if :: plan[me] = TAKE_K :: plan[me] = GIVE_K :: plan[me] = GIVE_ALL fi
    fi;
    assert(nfull(vq[m_i]));
    vq[m_i]!QUERY_OF(me); inflight[me]++;
    attempting[me] = true;
#ifdef LEASE
    replied[me] = false; cto[me] = 0;
#endif
    m_i = 0
  }
}

/* the application of node me receives one queued message (the lowest vnode it holds any for) */
inline app_receive(me) {
  d_step {
    (APPS > 0 && PRESENT(me) && ((OWNS(me, 0) && held[0] > 0) || (V > 1 && OWNS(me, 1 % V) && held[1 % V] > 0)
     || (V > 2 && OWNS(me, 2 % V) && held[2 % V] > 0) || (V > 3 && OWNS(me, 3 % V) && held[3 % V] > 0)
     || (V > 4 && OWNS(me, 4 % V) && held[4 % V] > 0) || (V > 5 && OWNS(me, 5 % V) && held[5 % V] > 0)
     || (V > 6 && OWNS(me, 6 % V) && held[6 % V] > 0) || (V > 7 && OWNS(me, 7 % V) && held[7 % V] > 0))) ->
    m_k = lo[me];
    do
    :: held[m_k] > 0 -> break
    :: else -> m_k++
    od;
    held[m_k]--; delivered[m_k]++;
    assert(delivered[m_k] == 1);  /* at most once */
    m_k = 0
  }
}

/* doc: leaving in the middle. A permanent leaver closes (ph_finalize after ph_leave): the driver waits until no
 * attempt of the node's own is under way (lock_protocol::busy() false: a take whose call timed out may still
 * bring it an interval), then looks at its interval, and closes only if that is empty; holding something, it
 * leaves again (here: it does not close, and may begin a give all). The guard of CLOSE is that: I empty and not
 * busy, in one step. A node that never joined closes the same way. It finalizes (GONE) once nothing involves
 * it; LOST is the monitor of what the driver's wait prevents. BUG_CLOSE_WHILE_BUSY is the code before the fix:
 * ph_leave returned at once on an empty interval, and ph_finalize closed whatever was under way. */
#if FINALIZE && defined(BUG_CLOSE_WHILE_BUSY)
#define CLOSE(me) :: d_step { (!closing[me] && EMPTY(me) && RUNS(me)) -> closing[me] = true; WITNESS(38); check_node(me) }
#elif FINALIZE
#define CLOSE(me) :: d_step { (!closing[me] && EMPTY(me) && !BUSY(me) && RUNS(me)) -> closing[me] = true; WITNESS(38); \
                              check_node(me) }
#else
#define CLOSE(me)
#endif
/* TEMP_LEAVE: a node that leaves temporarily (ph_finalize with a log, ph_suspend) closes with whatever it
 * assumes, once no attempt of its own is under way (the same wait), and finalizes once nothing involves it
 * (meanwhile it may still take what a give it granted its lock to brings). While it is gone its virtual nodes
 * keep their messages (the log, or the overlay, holds them). It reopens at any time, at most once: its suspend
 * could not go ahead (lock_protocol::reopen()), or it is back (the new incarnation assumes the same intervals;
 * nothing in flight to the old one may remain, which the receive path's assertion checks). Closing is then
 * reached with a non-empty interval, the only way the closing branches of on_query and on_lock2 are. */
#ifdef TEMP_LEAVE
#ifndef TEMP_NODE
#define TEMP_NODE 0
#endif
#define LEAVE_TEMPORARILY(me) \
  :: d_step { (me == TEMP_NODE && !closing[me] && !reopened[me] && !BUSY(me) && RUNS(me)) -> \
              closing[me] = true; temporary[me] = true; \
              if :: !EMPTY(me) -> WITNESS(39) :: else -> skip fi } \
  :: d_step { (closing[me] && temporary[me] && RUNS(me)) -> \
              if :: GONE(me) -> WITNESS(40) :: else -> WITNESS(41) fi; \
              closing[me] = false; temporary[me] = false; reopened[me] = true }
#else
#define LEAVE_TEMPORARILY(me)
#endif

/* CRASH: node me stops for good (SIGKILL), at any point, unless it has finalized already: what waits in its
 * inbox is never read (dropped here, which keeps the channels checkable), and send() drops what comes later.
 * What it sent before stays on the links and is delivered. Every step of the node is guarded by RUNS, so weak
 * fairness never asks a crashed node to move. */
#ifdef CRASH
inline crash(me) {
  crashed[me] = true; crash_used = true;
  m_j = 0;
  do
  :: m_j < N && m_j != me ->
     do
     :: nempty(LINK(m_j, me)) -> LINK(m_j, me)?m_t, m_a, m_b NUMF
     :: empty(LINK(m_j, me)) -> break
     od;
     m_j++
  :: m_j == me -> m_j++
  :: else -> break
  od;
#ifdef QUERY_INBOX
  do
  :: nempty(qin[me]) -> qin[me]?m_i, m_k
  :: empty(qin[me]) -> break
  od;
#endif
  inflight[me] = 0; m_i = 0; m_j = 0; m_t = 0; m_a = 0; m_b = 0
}
#define CRASH_STEP(me) :: d_step { (!crash_used && NOT_GONE(me)) -> crash(me) }
#else
#define CRASH_STEP(me)
#endif
/* SLOW: node me stops (SIGSTOP) at any point, once per run, and goes on later (SIGCONT) with its state and
 * inbox; meanwhile messages to it wait */
#ifdef SLOW
#define STOP_STEP(me) :: d_step { (!stop_used && RUNS(me) && NOT_GONE(me)) -> stopped[me] = true; stop_used = true } \
                      :: d_step { stopped[me] -> stopped[me] = false }
#else
#define STOP_STEP(me)
#endif

/* LEASE (doc, decision 8): a lease expires, at any moment, in a phase where breaking is safe: the own attempt
 * before both locks are held or with nothing to move (its own lock freed), a take after give_request (its own
 * lock freed, a pending take kept), a granted lock not yet used to release anything (a pending grant kept), open
 * invitations (forgotten). Never after a release: with CRASH the giver's lock is freed by partner_gone, a report
 * that the taker is gone for good (never a timeout), T staying in transit: an orphaned interval.
 * BUG_LEASE_AFTER_RELEASE: the giver takes T back when its lease expires after the release. */
#ifdef LEASE
inline lease_own(me) {
  if :: phase[me] == PH_TAKING -> WITNESS(51); broken[me] = broken[me] | BIT(NUM(me)); bpart[me] = xpart[me] :: else -> skip fi;
  if :: locked[me] && holder[me] == me -> free_lock(me) :: else -> skip fi;
  attempting[me] = false; phase[me] = PH_IDLE; xpart[me] = 0; cto[me] = 0; end_attempt(me);
#ifdef QUERY_INBOX
  qlost[me] = false;
#endif
  skip
}
inline forget_invitations(me) {
  m_j = 0;
  do
  :: m_j < N -> INV(me, m_j) = 0; m_j++
  :: else -> break
  od;
  m_j = 0
}
#define LEASE_OWN(me) ((attempting[me] && phase[me] == PH_IDLE) || phase[me] == PH_CLEANING || phase[me] == PH_TAKING)
#define LEASE_STEPS(me) \
  :: d_step { (RUNS(me) && LEASE_OWN(me) && CAN_EXPIRE_OWN) -> EXPIRE; lease_own(me); check_node(me) } \
  :: d_step { (RUNS(me) && locked[me] && holder[me] != me && phase[me] == PH_IDLE && CAN_EXPIRE_GRANT) -> \
              EXPIRE; WITNESS(52); broken[me] = broken[me] | BIT(gnum[me]); free_lock(me); gnum[me] = 0; check_node(me) } \
  :: d_step { (RUNS(me) && CAN_EXPIRE_INV && INVITED(me)) -> EXPIRE; WITNESS(53); forget_invitations(me); \
              check_node(me) } \
  :: d_step { (RUNS(me) && FORGETTABLE(me)) -> forget_gone(me); check_node(me) } \
  GONE_REPORT(me) LEASE_AFTER_RELEASE(me)
/* a pending grant or take whose partner finalized or crashed is forgotten (the code: its partner has had no
 * route for a lease): nothing more comes from a node that finalized (it was not involved), and what a crashed
 * one sent before is refused when it comes (on_stale) */
#define PARTNER_OF_BIT(me, n) ((n) / ATTEMPTS == (me) -> bpart[me] : (n) / ATTEMPTS)
#define FORGET_BIT(me, n) ((n) < N * ATTEMPTS && (broken[me] & BIT(n)) && \
                           (GONE(PARTNER_OF_BIT(me, n)) || CRASHED(PARTNER_OF_BIT(me, n))))
/* enabled only when it changes something: a step that changed nothing would let weak fairness (per process)
 * be satisfied by it alone, starving the node's lease steps */
#define FORGETTABLE(me) (FORGET_BIT(me, 0) || FORGET_BIT(me, 1) || FORGET_BIT(me, 2) || FORGET_BIT(me, 3) || \
                         FORGET_BIT(me, 4) || FORGET_BIT(me, 5) || FORGET_BIT(me, 6) || FORGET_BIT(me, 7))
inline forget_gone(me) {
  m_j = 0;
  do
  :: m_j < N * ATTEMPTS ->
     if :: FORGET_BIT(me, m_j) -> broken[me] = broken[me] & ~BIT(m_j) :: else -> skip fi;
     m_j++
  :: else -> break
  od;
  m_j = 0
}
#ifdef CRASH
/* T, if it was still on its way (its state dropped with the crashed taker's inbox), is lost with the taker: the
 * ghost moves to lost_lo/lost_hi, which the cover counts, so that the giver's next release does not overwrite it */
#define GONE_REPORT(me) \
  :: d_step { (RUNS(me) && phase[me] == PH_GIVING && CRASHED(xpart[me])) -> \
              if \
              :: tr_lo[me] < tr_hi[me] -> assert(lost_lo[me] == lost_hi[me]); lost_lo[me] = tr_lo[me]; lost_hi[me] = tr_hi[me] \
              :: else -> skip \
              fi; \
              tr_lo[me] = 0; tr_hi[me] = 0; \
              free_lock(me); phase[me] = PH_IDLE; xpart[me] = 0; check_node(me) }  /* no witness: CRASH with LEASE */
#else
#define GONE_REPORT(me)
#endif
#ifdef BUG_LEASE_AFTER_RELEASE
#define LEASE_AFTER_RELEASE(me) \
  :: d_step { (RUNS(me) && phase[me] == PH_GIVING) -> \
              m_tlo = tr_lo[me]; m_thi = tr_hi[me]; m_o = me; assume(me, m_o); m_o = 0; free_lock(me); phase[me] = PH_IDLE; xpart[me] = 0; \
              check_node(me) }
#else
#define LEASE_AFTER_RELEASE(me)
#endif
#else
#define LEASE_STEPS(me)
#endif

/* QUERY_INBOX: node me handles the query at the head of its inbox (line 20), but a node that closed does not
 * answer one for a virtual node it no longer assumes: in phoenix the overlay hands a query to the protocol only
 * on the node that assumes its virtual node and forwards it otherwise (ph_finalize's drain included), so it
 * goes back to the overlay, to whoever assumes the vnode. Only a node that has not closed answers from an
 * interval that no longer holds the vnode (the model's stronger host: an empty S reaches lines 34 and 54) */
#ifdef QUERY_INBOX
#define INBOX_STEP(me) \
  :: d_step { (RUNS(me) && nempty(qin[me])) -> \
              qin[me]?m_i, m_k; \
              if \
              :: closing[me] && !OWNS(me, m_k) -> WITNESS(59); assert(nfull(vq[m_k])); vq[m_k]!m_i \
              :: else -> DECODE_Q; on_query(me, m_i) \
              fi; \
              m_i = 0; m_k = 0; check_node(me) }
#else
#define INBOX_STEP(me)
#endif
/* QUERY_INBOX with LEASE: a closed node that nothing involves any more (ph_finalize draining its links) drops
 * the queries in its inbox for virtual nodes nobody assumes: the drain's bound (5 s) passed with no route for
 * them, and ph_finalize without a log file discards what is left (with one, the log keeps it for a next
 * incarnation). The initiator's lease ends the attempt (QLOST: that expiry is not counted). Without LEASE
 * nothing would end it (Final: an attempt outstanding for good), so the model without leases keeps the drain
 * unbounded, as it does for everything ph_finalize drains */
#if defined(QUERY_INBOX) && defined(LEASE)
#define UNROUTED(me, v) (V > (v) && !OWNS(me, (v) % V) && !OWNED_PRESENT((v) % V) && qin[me]??[_, eval((v) % V)])
#define DROP_STEP(me) \
  :: d_step { (RUNS(me) && closing[me] && !INVOLVED(me) && \
               (UNROUTED(me, 0) || UNROUTED(me, 1) || UNROUTED(me, 2) || UNROUTED(me, 3) || UNROUTED(me, 4) \
                || UNROUTED(me, 5) || UNROUTED(me, 6) || UNROUTED(me, 7))) -> \
              m_j = len(qin[me]); \
              do \
              :: m_j > 0 -> \
                 qin[me]?m_i, m_k; \
                 if \
                 :: !OWNS(me, m_k) && !OWNED_PRESENT(m_k) -> \
                    WITNESS(60); DECODE_Q; inflight[m_i]--; \
                    if :: attempting[m_i] && MINE(m_i) -> qlost[m_i] = true :: else -> skip fi \
                 :: else -> qin[me]!m_i, m_k  /* kept, in order */ \
                 fi; \
                 m_j-- \
              :: else -> break \
              od; \
              m_i = 0; m_j = 0; m_k = 0; check_node(me) }
#else
#define DROP_STEP(me)
#endif

proctype Node(byte me) {
end:
  do
  :: begin(me)
  CLOSE(me)
  LEAVE_TEMPORARILY(me)
  CRASH_STEP(me)
  STOP_STEP(me)
  LEASE_STEPS(me)
#ifndef FINE_FAIRNESS
  RECV(0) RECV(1) RECV(2) RECV(3) RECV(4) RECV(5)
#endif
  INBOX_STEP(me)
  DROP_STEP(me)
  FORGET_STEP(me)
  :: app_receive(me)
  od
}

/* ---- the overlay: a message to virtual node v reaches whoever assumes v when it is delivered, and waits
 * while nobody does ---- */
/* (the owner cannot have finalized for good: it would be LOST; a node gone for a temporary leave keeps what
 * waits for its virtual nodes until it is back, hence PRESENT; asserted all the same) */
#ifdef QUERY_INBOX
#define DELIVER_QUERY(v) vq[v]?m_i; owner_of(v); to_gone = GONE(m_o); assert(!to_gone); \
                         assert(nfull(qin[m_o])); qin[m_o]!m_i, v; m_i = 0; m_o = 0
#else
#define DELIVER_QUERY(v) vq[v]?m_i; DECODE_Q; owner_of(v); to_gone = GONE(m_o); assert(!to_gone); on_query(m_o, m_i); \
                         check_node(m_o); m_i = 0; m_o = 0
#endif
#define DELIVER(on, v) \
  :: d_step { (on && nempty(vq[v]) && OWNED_PRESENT(v)) -> DELIVER_QUERY(v) } \
  :: d_step { (on && pend[v] > 0 && OWNED_PRESENT(v)) -> pend[v]--; held[v]++ } \
  DUPLICATE(on, v)
#ifdef FINE_FAIRNESS
/* one process per virtual node, so that weak fairness applies to each vnode's deliveries on its own */
proctype VNode(byte v) {
end:
  do
  DELIVER(true, v)
  od
}
#else
/* one process for all virtual nodes (options unrolled for up to 8) */
proctype Overlay() {
end:
  do
  DELIVER(true, 0) DELIVER(V > 1, 1 % V) DELIVER(V > 2, 2 % V) DELIVER(V > 3, 3 % V)
  DELIVER(V > 4, 4 % V) DELIVER(V > 5, 5 % V) DELIVER(V > 6, 6 % V) DELIVER(V > 7, 7 % V)
  od
}
#endif

/* when nothing can move any more: everything settled, nothing lost */
proctype Final() {
  timeout ->
  d_step {
#ifndef CRASH
    m_i = 0;
    do
    :: m_i < N ->
       assert(!locked[m_i] && !attempting[m_i] && phase[m_i] == PH_IDLE && inflight[m_i] == 0);
       assert(tr_lo[m_i] == tr_hi[m_i]);
       invitation_open = INVITED(m_i); assert(!invitation_open);  /* decision 6: every lock_you_first answered */
#ifdef LEASE
       /* doc, decision 8: a pending grant or take ends with the partner's follow-up, or is forgotten once that
        * partner finalized (forget_gone): none is left at the end, and every node that closed has finalized */
       assert(!PENDING(m_i));
       assert(!closing[m_i] || GONE(m_i));
#else
       assert(!closing[m_i] || GONE(m_i));  /* every node that closed has finalized */
#endif
       m_i++
    :: else -> break
    od;
    m_i = 0;
    do
    :: m_i < N * (N - 1) -> assert(len(link[m_i]) == 0); m_i++
    :: else -> break
    od;
    m_i = 0;
    do
    :: m_i < V ->
       assert(len(vq[m_i]) == 0 && pend[m_i] == 0 && held[m_i] == 0);
       assert(delivered[m_i] == (APP0 <= m_i && m_i < APP0 + APPS -> 1 : 0));  /* exactly once */
       m_i++
    :: else -> break
    od;
#endif
    /* CRASH: what a crash leaves waiting for good is the business of the LTL properties (live_nodes) */
    check_cover()
  }
}

init {
  atomic {
    m_i = 0;
    do
    :: m_i < N ->
       holder[m_i] = NONE;
#ifndef UNBOUNDED
       tries[m_i] = ATTEMPTS;
#endif
#if INIT == 0
       if :: m_i == 0 -> lo[0] = 0; hi[0] = V :: else -> skip fi;
#elif INIT == 2
       /* node 0 assumes nothing, nodes 1 .. N-1 split [0, V) evenly in order */
       if
       :: m_i > 0 -> lo[m_i] = ((m_i - 1) * V) / (N - 1); hi[m_i] = (m_i * V) / (N - 1);
          if :: lo[m_i] == hi[m_i] -> lo[m_i] = 0; hi[m_i] = 0 :: else -> skip fi
       :: else -> skip
       fi;
#elif INIT == 3
       /* uneven: node 0 assumes [0, 1), node N-1 the rest, the others nothing */
       if
       :: m_i == 0 -> lo[0] = 0; hi[0] = 1
       :: m_i == N - 1 -> lo[m_i] = 1; hi[m_i] = V
       :: else -> skip
       fi;
#else
       if
       :: m_i < N - 1 -> lo[m_i] = (m_i * V) / (N - 1); hi[m_i] = ((m_i + 1) * V) / (N - 1);
          if :: lo[m_i] == hi[m_i] -> lo[m_i] = 0; hi[m_i] = 0 :: else -> skip fi
       :: else -> skip
       fi;
#endif
       m_i++
    :: else -> break
    od;
    check_cover();
    /* the application messages: one to each of vnodes APP0 .. APP0+APPS-1. They are all sent before anything else
     * happens: a message sent later behaves as one sent now and left waiting in the overlay until then, since
     * delivery (VNode) and reception (app_receive) are separate steps at nondeterministic times anyway */
    m_i = 0;
    do
    :: m_i < APPS -> pend[APP0 + m_i] = 1; m_i++
    :: else -> break
    od;
    m_i = 0;
    do
    :: m_i < N -> run Node(m_i); m_i++
    :: else -> break
    od;
#ifdef FINE_FAIRNESS
    m_i = 0;
    do
    :: m_i < N ->
       m_j = 0;
       do
       :: m_j < N && m_j != m_i -> run Link(m_i, m_j); m_j++
       :: m_j < N && m_j == m_i -> m_j++
       :: else -> break
       od;
       m_i++
    :: else -> break
    od;
    m_i = 0; m_j = 0;
    do
    :: m_i < V -> run VNode(m_i); m_i++
    :: else -> break
    od;
#else
    run Overlay();
#endif
#ifdef FORGE
    run Forger();
#endif
    run Final();
  }
}

#ifdef LIVENESS
/* under weak fairness every lock attempt ends (attempts_end), every lock is eventually free again (locks_free),
 * both at once (live); every open invitation is answered (invitations_end); a node that closed finalizes
 * (finalizes: closed and involved, it eventually is not, i.e. GONE, as closing stays set). settles, the one
 * check.sh runs, says every involvement ends, which implies all of these (attempting, locked, invited each
 * imply involved; closing stays set), with a smaller claim than their conjunction */
#define ENDS(x) ((x) -> <> !(x))
#if N == 3
#define ALL_ATTEMPTS (ENDS(attempting[0]) && ENDS(attempting[1]) && ENDS(attempting[2]))
#define ALL_LOCKS (ENDS(locked[0]) && ENDS(locked[1]) && ENDS(locked[2]))
#define ALL_INVITATIONS (ENDS(INVITED(0)) && ENDS(INVITED(1)) && ENDS(INVITED(2)))
#define ALL_FINALIZE (ENDS(closing[0] && INVOLVED(0)) && ENDS(closing[1] && INVOLVED(1)) \
                      && ENDS(closing[2] && INVOLVED(2)))
#define ALL_INVOLVED (ENDS(INVOLVED(0)) && ENDS(INVOLVED(1)) && ENDS(INVOLVED(2)))
#define QUIET (!attempting[0] && !attempting[1] && !attempting[2] && !locked[0] && !locked[1] && !locked[2])
#elif N == 4
#define ALL_ATTEMPTS (ENDS(attempting[0]) && ENDS(attempting[1]) && ENDS(attempting[2]) && ENDS(attempting[3]))
#define ALL_LOCKS (ENDS(locked[0]) && ENDS(locked[1]) && ENDS(locked[2]) && ENDS(locked[3]))
#define ALL_INVITATIONS (ENDS(INVITED(0)) && ENDS(INVITED(1)) && ENDS(INVITED(2)) && ENDS(INVITED(3)))
#define ALL_FINALIZE (ENDS(closing[0] && INVOLVED(0)) && ENDS(closing[1] && INVOLVED(1)) \
                      && ENDS(closing[2] && INVOLVED(2)) && ENDS(closing[3] && INVOLVED(3)))
#define ALL_INVOLVED (ENDS(INVOLVED(0)) && ENDS(INVOLVED(1)) && ENDS(INVOLVED(2)) && ENDS(INVOLVED(3)))
#define QUIET (!attempting[0] && !attempting[1] && !attempting[2] && !attempting[3] && !locked[0] && !locked[1] \
               && !locked[2] && !locked[3])
#else
#define ALL_ATTEMPTS (ENDS(attempting[0]) && ENDS(attempting[1]))
#define ALL_LOCKS (ENDS(locked[0]) && ENDS(locked[1]))
#define ALL_INVITATIONS (ENDS(INVITED(0)) && ENDS(INVITED(1)))
#define ALL_FINALIZE (ENDS(closing[0] && INVOLVED(0)) && ENDS(closing[1] && INVOLVED(1)))
#define ALL_INVOLVED (ENDS(INVOLVED(0)) && ENDS(INVOLVED(1)))
#define QUIET (!attempting[0] && !attempting[1] && !locked[0] && !locked[1])
#endif
ltl settles { [] ALL_INVOLVED }
/* CRASH, SLOW: every attempt of a node that has not crashed ends, and every lock it holds or granted is freed
 * again (LIVE_ENDS: x holds of a live node, then eventually x does not, or the node crashed). Under weak fairness
 * only the nodes that have not crashed must move: a crashed node's steps are all disabled */
#define LIVE_ENDS(i, x) (((x) && !CRASHED(i)) -> <> (!(x) || CRASHED(i)))
#define LIVE_NODE(i) (LIVE_ENDS(i, attempting[i]) && LIVE_ENDS(i, locked[i]))
#if N == 3
ltl live_nodes { [] (LIVE_NODE(0) && LIVE_NODE(1) && LIVE_NODE(2)) }
#elif N == 4
ltl live_nodes { [] (LIVE_NODE(0) && LIVE_NODE(1) && LIVE_NODE(2) && LIVE_NODE(3)) }
#else
ltl live_nodes { [] (LIVE_NODE(0) && LIVE_NODE(1)) }
#endif
ltl live { [] (ALL_ATTEMPTS && ALL_LOCKS) }
/* stronger, and only true with a bound on attempts: every run ends with no attempt and no lock */
ltl quiesce { <> [] (QUIET) }
ltl attempts_end { [] ALL_ATTEMPTS }
ltl locks_free { [] ALL_LOCKS }
ltl invitations_end { [] ALL_INVITATIONS }
ltl finalizes { [] ALL_FINALIZE }
#endif

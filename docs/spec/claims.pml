/*
 * Assay's claim and fencing protocol (DESIGN.md section 5), for the spin model checker.
 *
 * One claim ref and one journal (its checkpoint ref and code branch, pushed together) per
 * brief live on a forge whose ref updates are atomic compare-and-swap (git's ref lock on
 * the server). Desks fetch claims, acquire by CAS push, push a takeover entry, renew, push
 * journal entries (CAS on the journal's tip),
 * make effects after re-checking ownership, suspend to `waiting`, release, finish `done`,
 * crash (losing every local variable) and pause past their lease (zombies) and resume.
 * A sweeper marks expired claims `stuck`. A clock advances abstract time.
 *
 * README.md next to this file says what is assumed and what is not modelled;
 * broken_*.pml are variants the checker must reject.
 *
 * Compile-time knobs (spin -DNAME=value):
 *   ND, NB            desks (2 or 3) and briefs (1 or 2)
 *   LEASE             lease length in ticks
 *   SKEW, ALLOW       true bound on clock differences, and the allowance the expiry rule adds
 *   MAXACQ            voluntary acquisitions (absent, released, waiting) in the whole run;
 *                     takeovers of stuck or expired claims are not budgeted (liveness needs
 *                     them), and they are bounded anyway: only a crash or a pause expires one
 *   MAXCRASH          crashes in the whole run; MAXPAUSE: pauses in the whole run
 *   MAXWORK           journal steps per tenure after the takeover (a plain entry, or an
 *                     effect with the push that is its durability point)
 *   MAXRENEW          renewals per tenure
 *   SYMMETRY          store states up to a renaming of desks (for the exhaustive run; traces
 *                     then name desks by their sorted position, so replays leave it off)
 *   COVER             adds the reachability witnesses (ltl reach_*; see README.md)
 * Broken variants define one of BROKEN_RENEW, BROKEN_EFFECT, BROKEN_TAKEOVER, BROKEN_DONE,
 * BROKEN_RECOVERY, or set SKEW above ALLOW.
 */

#ifndef ND
#define ND 3
#endif
#ifndef NB
#define NB 2
#endif
#ifndef LEASE
#define LEASE 2
#endif
#ifndef SKEW
#define SKEW 1
#endif
#ifndef ALLOW
#define ALLOW 1
#endif
#ifndef MAXACQ
#define MAXACQ 2
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXPAUSE
#define MAXPAUSE 1
#endif
#ifndef MAXWORK
#define MAXWORK 1
#endif
#ifndef MAXRENEW
#define MAXRENEW 1
#endif

/* Clocks. An actor measures a lease stamped by another actor's clock; the two clocks differ
 * by at most SKEW, so it reads an age anywhere in [age - SKEW, age + SKEW]. Every reading may
 * fall anywhere in that band, independently each time (which also covers clocks that drift
 * or jump within the bound): a claim is expired for some reader once age + SKEW > LEASE +
 * ALLOW. A holder measures its own lease on its own clock. Ages saturate at AGECAP, past
 * which no reading tells two ages apart. */
#if LEASE + ALLOW - SKEW + 1 > LEASE + 1
#define AGECAP (LEASE + ALLOW - SKEW + 1)
#else
#define AGECAP (LEASE + 1)
#endif

#define NONE 255

mtype = { ABSENT, HELD, WAITING, RELEASED, DONE, STUCK };    /* claim.json "state" */
mtype = { renew_refused, push_refused, journal_ahead, not_owner, cas_refused };

/* desk modes */
#define IDLE 0
#define READ 1      /* fetched a claimable claim; the CAS push leasing it is next */
#define HOLD 2
/* phases of a tenure */
#define TAKE 1      /* tip fetched with the claim; the takeover entry is next */
#define REFETCH 2   /* the tip moved under the takeover push: fetch it again */
#define WORK 3      /* the takeover landed */
#define CHECKED 4   /* the ownership re-check passed; the effect is next */

typedef Claim {
    mtype state;
    byte holder;
    byte fence;
    byte age;       /* true ticks since renewed_at was stamped (only while held) */
};

/* A CAS push names the commit it expects. Commits never repeat (every push makes a new one),
 * so "the ref still points at the commit I expect" is exactly "nobody pushed the ref since I
 * read or pushed it": a bit per reader (ccur, tcur, scur) instead of a growing sha. */
typedef DeskState {
    byte mode;
    byte phase;
    byte brief;     /* the brief read (READ) or held (HOLD) */
    byte f;         /* the fence held */
    bool ccur;      /* the claim commit it read or last pushed is still the ref's */
    bool tcur;      /* the branch tip it fetched or last pushed is still the branch's */
    byte age;       /* true ticks since it stamped its lease */
    bool paused;
    byte work;      /* journal steps left in this tenure */
    byte renews;    /* renewals left in this tenure */
    byte chk;       /* ghost: the highest fence issued when its ownership re-check passed */
};

Claim claim[NB];
byte jfence[NB];            /* fence of the last journal entry on each brief's branch */
DeskState desk[ND];

bool sreading;              /* the sweeper read a claim and is about to push */
bool scur;                  /* ... and the commit it read is still the ref's */
byte sb;                    /* ... of this brief */

byte vacq = MAXACQ;         /* budgets of the whole run */
byte crashes = MAXCRASH;
byte pauses = MAXPAUSE;

/* Ghost state, written only to state the properties. */
byte issued[NB];            /* the highest fence ever issued for the brief */
bool orphan[NB];            /* its holder crashed, and nobody has acquired it since */

/* Coverage witnesses (-DCOVER): each flag marks a path the properties are about; a check
 * that "[] !flag" fails proves the path reachable, so the safety run is not vacuous. */
#ifdef COVER
bool seen_steal, seen_stuck, seen_wake, seen_done, seen_recovered;
bool seen_window_effect, seen_window_entry;
bool seen_renew_refused, seen_push_refused, seen_journal_ahead, seen_not_owner,
     seen_cas_refused;
#define COVERED(flag) flag = true
#else
#define COVERED(flag) skip
#endif

byte k;                     /* scratch, always 0 between steps */

#define REQUIRE(cond, msg) if :: !(cond) -> printf(msg) :: else -> skip fi; assert(cond)

#ifdef BROKEN_RECOVERY
/* Broken: nobody ever judges a lease expired (no takeover, no sweeper). */
#define expired(b) false
#else
#define expired(b) (claim[b].state == HELD && claim[b].age + SKEW > LEASE + ALLOW)
#endif

#ifdef BROKEN_DONE
/* Broken: reads DESIGN's acquire rule as "released, done or expired". */
#define reusable(b) (claim[b].state == ABSENT || claim[b].state == RELEASED || \
                     claim[b].state == WAITING || claim[b].state == DONE)
#else
#define reusable(b) (claim[b].state == ABSENT || claim[b].state == RELEASED || \
                     claim[b].state == WAITING)
#endif

#define claimable(b) ((reusable(b) && vacq > 0) || claim[b].state == STUCK || expired(b))

#define holding(d) (desk[d].mode == HOLD && !desk[d].paused)
#define me desk[d]

/* A live holder believes it holds the brief, and by its own clock its lease still runs. */
#define live(d, b) ((desk[d].mode == HOLD && desk[d].brief == b && desk[d].age <= LEASE) -> 1 : 0)
#if ND == 3
#define nlive(b) (live(0, b) + live(1, b) + live(2, b))
#else
#define nlive(b) (live(0, b) + live(1, b))
#endif
#if NB == 2
#define mutex_ok (nlive(0) <= 1 && nlive(1) <= 1)
#else
#define mutex_ok (nlive(0) <= 1)
#endif

/* A timely holder heartbeats before its lease runs out, so time waits for it: a pause or
 * a crash is the only way a lease expires, and both are bounded. */
#define blocks(d) (holding(d) && desk[d].age + 1 >= LEASE)
#define dages(d) (desk[d].mode == HOLD && desk[d].age < AGECAP)
#define cages(b) (claim[b].state == HELD && claim[b].age < AGECAP)
#if ND == 3
#define noblock (!blocks(0) && !blocks(1) && !blocks(2))
#define anydesk (dages(0) || dages(1) || dages(2))
#else
#define noblock (!blocks(0) && !blocks(1))
#define anydesk (dages(0) || dages(1))
#endif
#if NB == 2
#define anyage (anydesk || cages(0) || cages(1))
#else
#define anyage (anydesk || cages(0))
#endif

/* A push to brief b's claim ref makes every commit read or pushed before it stale. */
#define stale_claim(b) \
    k = 0; \
    do \
    :: k < ND -> \
        if \
        :: desk[k].mode != IDLE && desk[k].brief == (b) -> desk[k].ccur = false \
        :: else \
        fi; \
        k++ \
    :: else -> break \
    od; \
    k = 0; \
    if \
    :: sreading && sb == (b) -> scur = false \
    :: else \
    fi

/* Every update of a claim ref: a new commit, and a fence that never goes back. */
#define put_claim(b, st, h, fen) \
    REQUIRE((fen) >= claim[b].fence, \
        "VIOLATED: the claim ref's fence went backwards (a superseded holder overwrote it)\n"); \
    REQUIRE(claim[b].state != DONE, "VIOLATED: a done brief's claim changed again\n"); \
    stale_claim(b); \
    claim[b].state = st; \
    claim[b].holder = h; \
    claim[b].fence = fen; \
    claim[b].age = 0

/* A journal entry of desk d lands on its brief's branch (it won the CAS on the tip). */
inline land(d) {
    REQUIRE(me.f >= jfence[me.brief],
        "VIOLATED: a journal entry from a fenced holder landed after a newer holder's entries\n");
    k = 0;
    do
    :: k < ND ->
        if
        :: desk[k].mode == HOLD && desk[k].brief == me.brief -> desk[k].tcur = false
        :: else
        fi;
        k++
    :: else -> break
    od;
    k = 0;
    if
    :: issued[me.brief] > me.f -> COVERED(seen_window_entry)
    :: else
    fi;
    jfence[me.brief] = me.f;
    me.tcur = true
}

inline forget(d) {
    me.mode = IDLE; me.phase = 0; me.brief = 0; me.f = 0; me.ccur = false; me.tcur = false;
    me.age = 0; me.paused = false; me.work = 0; me.renews = 0; me.chk = 0
}

inline fenced(d, why) {
    printf("desk %d stops FENCED on brief %d (fence %d): %e\n", d, me.brief, me.f, why);
#ifdef COVER
    if
    :: why == renew_refused -> seen_renew_refused = true
    :: why == push_refused -> seen_push_refused = true
    :: why == journal_ahead -> seen_journal_ahead = true
    :: why == not_owner -> seen_not_owner = true
    :: why == cas_refused -> seen_cas_refused = true
    fi;
#endif
    forget(d)
}

/* Symmetry: desks run identical code and all their state is in desk[], so any renaming of
 * desks (with claim holders renamed alike) is an automorphism of the model. Sorting desks
 * by their whole state, including whether each claim names them, picks one representative
 * per class. Every step that changes desk state ends with canon(). */
#ifdef SYMMETRY
c_code {
/* The sort key of desk i: its whole state, then whether each claim names it. */
static unsigned long desk_key(int i) {
    unsigned long key = now.desk[i].mode;
    key = key * 8 + now.desk[i].phase;
    key = key * 2 + now.desk[i].brief;
    key = key * 16 + now.desk[i].f;
    key = key * 2 + now.desk[i].ccur;
    key = key * 2 + now.desk[i].tcur;
    key = key * 8 + now.desk[i].age;
    key = key * 2 + now.desk[i].paused;
    key = key * 4 + now.desk[i].work;
    key = key * 4 + now.desk[i].renews;
    key = key * 16 + now.desk[i].chk;
    for (int b = 0; b < NB; b++) {
        key = key * 2 + (now.claim[b].holder == i);
    }
    return key;
}

static void canon_desks(void) {
    for (int pass = 0; pass < ND; pass++) {
        for (int i = 0; i + 1 < ND; i++) {
            if (desk_key(i) > desk_key(i + 1)) {
                struct DeskState t = now.desk[i];
                now.desk[i] = now.desk[i + 1];
                now.desk[i + 1] = t;
                for (int b = 0; b < NB; b++) {
                    if (now.claim[b].holder == i) {
                        now.claim[b].holder = i + 1;
                    } else if (now.claim[b].holder == i + 1) {
                        now.claim[b].holder = i;
                    }
                }
            }
        }
    }
}
}

inline canon() {
    c_code { canon_desks(); }
}
#else
inline canon() {
    skip
}
#endif

proctype Desk(byte d) {
end:
    do
    /* Fetch every claim ref (one round trip) and pick a brief claimable by this desk's
     * clock; the CAS push that follows leases the commit just read. */
    :: d_step { me.mode == IDLE && claimable(0) -> me.mode = READ; me.brief = 0; me.ccur = true;
                canon() }
#if NB == 2
    :: d_step { me.mode == IDLE && claimable(1) -> me.mode = READ; me.brief = 1; me.ccur = true;
                canon() }
#endif
    :: d_step { me.mode == READ ->
        if
        :: me.ccur && (claim[me.brief].state == HELD || claim[me.brief].state == STUCK || vacq > 0) ->
            if
            :: claim[me.brief].state == HELD || claim[me.brief].state == STUCK ->
                if
                :: claim[me.brief].state == HELD -> COVERED(seen_steal)
                :: else -> COVERED(seen_stuck)
                fi;
                if
                :: orphan[me.brief] -> COVERED(seen_recovered)
                :: else
                fi;
                printf("desk %d takes over brief %d from desk %d (%e at fence %d, stamped %d ticks ago)\n",
                       d, me.brief, claim[me.brief].holder, claim[me.brief].state,
                       claim[me.brief].fence, claim[me.brief].age)
            :: else ->
                if
                :: claim[me.brief].state == WAITING -> COVERED(seen_wake)
                :: else
                fi;
                vacq--;
                printf("desk %d acquires brief %d (%e)\n", d, me.brief, claim[me.brief].state)
            fi;
            REQUIRE(claim[me.brief].state != DONE, "VIOLATED: a done brief was claimed again\n");
            assert(claim[me.brief].fence < 15);    /* model bound: fences fit the symmetry key */
            put_claim(me.brief, HELD, d, claim[me.brief].fence + 1);
            issued[me.brief] = claim[me.brief].fence;
            orphan[me.brief] = false;
            me.mode = HOLD; me.phase = TAKE; me.f = claim[me.brief].fence;
            me.ccur = true; me.tcur = true;    /* and the branch tip, fetched right after */
            me.age = 0; me.work = MAXWORK; me.renews = MAXRENEW;
            printf("desk %d holds brief %d at fence %d\n", d, me.brief, me.f)
        :: else -> forget(d)    /* lost the race: Busy */
        fi;
        canon()
    }

    /* A new holder's first journal act: push a takeover entry as a CAS on the tip fetched
     * right after acquiring; when the tip moved, fetch it again, and stop FENCED if a newer
     * fence wrote it. */
    :: d_step { holding(d) && me.phase == TAKE ->
        if
        :: me.tcur ->
            printf("desk %d pushes its takeover entry on brief %d at fence %d\n", d, me.brief, me.f);
            land(d);
            me.phase = WORK
        :: else ->
            printf("desk %d: the tip of brief %d moved under its takeover push\n", d, me.brief);
            me.phase = REFETCH
        fi;
        canon()
    }
    :: d_step { holding(d) && me.phase == REFETCH ->
        if
#ifndef BROKEN_TAKEOVER
        :: jfence[me.brief] > me.f -> fenced(d, journal_ahead)
#endif
        :: else ->
            printf("desk %d fetches the tip of brief %d again (last entry at fence %d)\n",
                   d, me.brief, jfence[me.brief]);
            me.phase = TAKE; me.tcur = true
        fi;
        canon()
    }

    /* Renew (the heartbeat, on its own thread): a CAS push from the claim commit this desk
     * last pushed. */
    :: d_step { holding(d) && me.renews > 0 ->
#ifdef BROKEN_RENEW
        /* Broken: renew rewrites the holder's record without leasing its last commit. */
        printf("desk %d renews brief %d at fence %d (no CAS)\n", d, me.brief, me.f);
        put_claim(me.brief, HELD, d, me.f);
        me.ccur = true; me.age = 0; me.renews--;
#else
        if
        :: me.ccur ->
            printf("desk %d renews brief %d at fence %d\n", d, me.brief, me.f);
            put_claim(me.brief, HELD, d, me.f);
            me.ccur = true; me.age = 0; me.renews--
        :: else -> fenced(d, renew_refused)
        fi;
#endif
        canon()
    }

    /* A journal step: a CAS push on the tip this desk last pushed. */
    :: d_step { holding(d) && me.phase == WORK && me.work > 0 ->
        if
        :: me.tcur ->
            printf("desk %d pushes a journal entry on brief %d at fence %d\n", d, me.brief, me.f);
            land(d);
            me.work--
        :: else -> fenced(d, push_refused)
        fi;
        canon()
    }

    /* An effect: re-read the claim ref and go on only while it still names this desk at its
     * fence (fail closed otherwise). The effect happens later, at its own instant; the push
     * right after it is its durability point. */
    :: d_step { holding(d) && me.phase == WORK && me.work > 0 ->
        if
        :: claim[me.brief].state == HELD && claim[me.brief].holder == d && claim[me.brief].fence == me.f ->
            me.phase = CHECKED;
            me.chk = issued[me.brief];
            printf("desk %d re-reads the claim of brief %d before an effect: still its holder\n",
                   d, me.brief)
        :: else -> fenced(d, not_owner)
        fi;
        canon()
    }
#ifdef BROKEN_EFFECT
    /* Broken: the effect runs without the ownership re-check. */
    :: d_step { holding(d) && (me.phase == CHECKED || (me.phase == WORK && me.work > 0)) ->
#else
    :: d_step { holding(d) && me.phase == CHECKED ->
#endif
        if
        :: issued[me.brief] > me.f ->
            COVERED(seen_window_effect);
            printf("desk %d makes an effect on brief %d at fence %d, after fence %d was issued\n",
                   d, me.brief, me.f, issued[me.brief])
        :: else ->
            printf("desk %d makes an effect on brief %d at fence %d\n", d, me.brief, me.f)
        fi;
        REQUIRE(issued[me.brief] <= me.f || (me.phase == CHECKED && me.chk == me.f),
            "VIOLATED: an effect by a fenced holder outside the window idempotency keys cover\n");
        me.phase = WORK; me.chk = 0; me.work--;
        if
        :: me.tcur ->
            printf("desk %d pushes the effect's entry on brief %d at fence %d\n", d, me.brief, me.f);
            land(d)
        :: else -> fenced(d, push_refused)
        fi;
        canon()
    }

    /* Suspend, release, finish: CAS pushes from the claim commit this desk last pushed. */
    :: d_step { holding(d) && me.phase == WORK ->
        if
        :: me.ccur ->
            printf("desk %d suspends on brief %d: waiting\n", d, me.brief);
            put_claim(me.brief, WAITING, d, me.f);
            forget(d)
        :: else -> fenced(d, cas_refused)
        fi;
        canon()
    }
    :: d_step { holding(d) && me.phase == WORK ->
        if
        :: me.ccur ->
            printf("desk %d releases brief %d\n", d, me.brief);
            put_claim(me.brief, RELEASED, d, me.f);
            forget(d)
        :: else -> fenced(d, cas_refused)
        fi;
        canon()
    }
    :: d_step { holding(d) && me.phase == WORK ->
        if
        :: me.ccur ->
            printf("desk %d finishes brief %d: done\n", d, me.brief);
            put_claim(me.brief, DONE, d, me.f);
            COVERED(seen_done);
            forget(d)
        :: else -> fenced(d, cas_refused)
        fi;
        canon()
    }

    /* Faults. A crash loses every local variable (a crash before the CAS push of an acquire
     * is the same as losing that race). A pause stops the process while time passes; it
     * resumes where it was, as a zombie if its lease ran out meanwhile. */
    :: d_step { me.mode == HOLD && crashes > 0 ->
        crashes--;
        if
        :: claim[me.brief].state == HELD && claim[me.brief].holder == d && claim[me.brief].fence == me.f ->
            orphan[me.brief] = true
        :: else
        fi;
        printf("desk %d CRASHES\n", d);
        forget(d);
        canon()
    }
    :: d_step { holding(d) && pauses > 0 ->
        pauses--;
        me.paused = true;
        printf("desk %d PAUSES holding brief %d at fence %d\n", d, me.brief, me.f);
        canon()
    }
    :: d_step { me.mode == HOLD && me.paused ->
        me.paused = false;
        printf("desk %d resumes, %d ticks after it last stamped its lease\n", d, me.age);
        canon()
    }
    od
}

/* The sweeper: one fetch of the claim refs, then a CAS push marking an expired claim
 * `stuck` (holder and fence kept) so that any desk may take it over. */
active proctype Sweeper() {
end:
    do
    :: d_step { !sreading && expired(0) -> sreading = true; scur = true; sb = 0 }
#if NB == 2
    :: d_step { !sreading && expired(1) -> sreading = true; scur = true; sb = 1 }
#endif
    :: d_step { sreading ->
        if
        :: scur ->
            printf("sweeper marks brief %d stuck (desk %d, fence %d)\n", sb, claim[sb].holder,
                   claim[sb].fence);
            put_claim(sb, STUCK, claim[sb].holder, claim[sb].fence)
        :: else
        fi;
        sb = 0; scur = false; sreading = false
    }
    od
}

/* Abstract time: one tick ages every held claim and every holder's own lease. */
active proctype Clock() {
end:
    do
    :: d_step { noblock && anyage ->
        printf("time passes\n");
        k = 0;
        do
        :: k < NB ->
            if
            :: cages(k) -> claim[k].age++
            :: else
            fi;
            k++
        :: else -> break
        od;
        k = 0;
        do
        :: k < ND ->
            if
            :: dages(k) -> desk[k].age++
            :: else
            fi;
            k++
        :: else -> break
        od;
        k = 0;
        canon()
    }
    od
}

/* At most one live holder per brief, checked in every reachable state. */
active proctype Monitor() {
end:
    atomic {
        !mutex_ok ->
        printf("VIOLATED: two desks hold a brief with unexpired leases\n");
        assert(mutex_ok)
    }
}

init {
    byte i;
    atomic {
        i = 0;
        do
        :: i < NB -> claim[i].state = ABSENT; claim[i].holder = NONE; i++
        :: else -> break
        od;
        i = 0;
        do
        :: i < ND -> run Desk(i); i++
        :: else -> break
        od;
        i = 0
    }
}

/* Liveness under weak fairness: a brief whose holder crashed is eventually held again. */
#if NB == 2
ltl recovered { [] ((orphan[0] -> <> !orphan[0]) && (orphan[1] -> <> !orphan[1])) }
#else
ltl recovered { [] (orphan[0] -> <> !orphan[0]) }
#endif

#ifdef COVER
ltl reach_steal { [] !seen_steal }
ltl reach_stuck { [] !seen_stuck }
ltl reach_wake { [] !seen_wake }
ltl reach_done { [] !seen_done }
ltl reach_recovered { [] !seen_recovered }
ltl reach_window_effect { [] !seen_window_effect }
ltl reach_window_entry { [] !seen_window_entry }
ltl reach_renew_refused { [] !seen_renew_refused }
ltl reach_push_refused { [] !seen_push_refused }
ltl reach_journal_ahead { [] !seen_journal_ahead }
ltl reach_not_owner { [] !seen_not_owner }
ltl reach_cas_refused { [] !seen_cas_refused }
#endif

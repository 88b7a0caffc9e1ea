package tiers

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// defaultWaitPoll is how often a waiting EnsureHot looks again at an
// artifact another process is working on.
const defaultWaitPoll = 500 * time.Millisecond

// heldByOperation reports whether a live process holds the artifact's
// lock in the tier rooted at root exclusively, as every operation that
// changes it does. It probes with a shared lock, which a server's lease
// (shared too) does not block, and lets go at once.
func (m *Manager) heldByOperation(t *Tier, name string) (bool, error) {
	unlock, err := m.lock(t, name, false)
	if errors.Is(err, ErrBusy) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	unlock()
	return false, nil
}

// journalRunning reports whether a live process runs the operation j
// records: operations hold the artifact's lock in the destination tier,
// where the record lives, for as long as they run, and the kernel drops
// a crashed holder's lock.
func (m *Manager) journalRunning(j *Journal) (bool, error) {
	home, ok := m.Config.Tier(j.home().Tier)
	if !ok {
		return false, &StateError{File: j.recordPath(), Msg: fmt.Sprintf("tier %q is not in the configuration", j.home().Tier)}
	}
	return m.heldByOperation(home, j.Artifact)
}

// journalBusy is the refusal of another operation on j's artifact while
// j is unfinished: it names j, and says whether a live process runs it
// (waiting helps) or a crash interrupted it (only `gguftool tiers
// recover` settles it).
func (m *Manager) journalBusy(j *Journal) error {
	running, err := m.journalRunning(j)
	if err != nil {
		return err
	}
	if running {
		return &BusyError{Artifact: j.Artifact, Tier: j.Dest.Tier, Reason: fmt.Sprintf(
			"a %s from %s to %s is running in another process (journal %s, at step %s; its lock is held)", j.Op, j.Source.Tier, j.Dest.Tier, j.ID, j.Step)}
	}
	return &BusyError{Artifact: j.Artifact, Tier: j.Dest.Tier, interrupted: true, Reason: fmt.Sprintf(
		"an interrupted %s from %s to %s is pending (journal %s, at step %s; no process holds its lock): finish it with `gguftool tiers recover` or undo it with `gguftool tiers recover --rollback`",
		j.Op, j.Source.Tier, j.Dest.Tier, j.ID, j.Step)}
}

// ensureHotBlocker returns the refusal of an ensure-hot of the artifact
// while another operation works on it: a journaled operation on it that
// is running or pending (except an interrupted copy onto hot itself,
// which ensure-hot resumes, returned as resume), or a lock an operation
// holds on it in hot or in a tier holding a copy (an operation that has
// not written its journal yet). Without this an ensure-hot would call a
// copy that a running migration is about to drop "already there".
func (m *Manager) ensureHotBlocker(name string, hot *Tier, locs []Location) (resume *Journal, err error) {
	j, err := m.pendingFor(name)
	if err != nil {
		return nil, err
	}
	if j != nil {
		running, err := m.journalRunning(j)
		if err != nil {
			return nil, err
		}
		if !running && j.Op == OpCopy && j.Dest.Tier == hot.Name {
			return j, nil
		}
		return nil, m.journalBusy(j)
	}
	roots := []*Tier{hot}
	for _, l := range locs {
		if l.Tier != hot {
			roots = append(roots, l.Tier)
		}
	}
	for _, t := range roots {
		held, err := m.heldByOperation(t, name)
		if err != nil {
			return nil, err
		}
		if held {
			return nil, &BusyError{Artifact: name, Tier: t.Name, Reason: "another operation (a migrate, ensure-hot, evict or recover) holds its lock"}
		}
	}
	return nil, nil
}

// waitable reports whether err is a refusal that waiting can end: an
// operation a live process runs, not one a crash left pending.
func waitable(err error) (*BusyError, bool) {
	var be *BusyError
	if !errors.As(err, &be) || be.interrupted {
		return nil, false
	}
	return be, true
}

// pause sleeps for the poll interval, or until ctx is done.
func (m *Manager) pause(ctx context.Context) error {
	every := m.waitPoll
	if every <= 0 {
		every = defaultWaitPoll
	}
	if !sleep(ctx, every) {
		return context.Cause(ctx)
	}
	return nil
}

// sleep waits for d, or until ctx is done; it reports whether the whole
// of d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

package tiers

// StatusSchema names the document `gguftool tiers status --json` prints;
// its version is the /vN suffix, as for every command's --json document.
const StatusSchema = "gguftool.tiers-status/v1"

// Status is every tier's space and artifacts, and the operations not
// finished.
type Status struct {
	Schema string        `json:"schema"`
	Config string        `json:"config"`
	Tiers  []*TierStatus `json:"tiers"`
	// Pending lists every journaled operation: outcome "running" when a
	// live process holds its lock, "pending" when none does (a crash
	// interrupted it: `gguftool tiers recover` settles it).
	Pending []Recovered `json:"pending,omitempty"`
}

// Outcomes of an unfinished operation in a Status.
const (
	OutcomeRunning = "running"
	OutcomePending = "pending"
)

// TierStatus is one tier.
type TierStatus struct {
	Name      string            `json:"name"`
	Root      string            `json:"root,omitempty"`
	URL       string            `json:"url,omitempty"`      // an object tier: s3://bucket/prefix
	Endpoint  string            `json:"endpoint,omitempty"` // and its server
	Role      Role              `json:"role"`
	Online    bool              `json:"online"`
	Room      Room              `json:"room"`
	Artifacts []*ArtifactStatus `json:"artifacts"`
	Error     string            `json:"error,omitempty"`
}

// Verification states of a copy.
const (
	// VerifiedState: every file has a recorded digest and is unchanged
	// since (by dev, inode, size, mtime, ctime).
	VerifiedState = "verified"
	// StaleState: some file changed since its digest was recorded.
	StaleState = "stale"
	// UnverifiedState: some file has no recorded digest.
	UnverifiedState = "unverified"
)

// ArtifactStatus is one artifact in a tier.
type ArtifactStatus struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Size  int64  `json:"size"`
	Files int    `json:"files"`
	// Verification is verified, stale or unverified; VerifiedUnix is the
	// oldest of its files' last verification (0 when not verified).
	Verification string `json:"verification"`
	VerifiedUnix int64  `json:"verified_unix,omitempty"`
	LastUseUnix  int64  `json:"last_use_unix,omitempty"`
	// Twins are the other tiers that hold a copy with the same files and
	// sizes (a structural match; content is what `twins verify` checks).
	Twins []string `json:"twins,omitempty"`
}

// Status reports every tier without reading any artifact's content.
func (m *Manager) Status() (*Status, error) {
	s := &Status{Schema: StatusSchema, Config: m.Config.Path}
	scans := map[*Tier][]*Artifact{}
	for _, t := range m.Config.Tiers {
		ts := &TierStatus{Name: t.Name, Root: t.Root, Role: t.Role, Online: m.online(t), Artifacts: []*ArtifactStatus{}}
		if t.IsObject() {
			ts.URL, ts.Endpoint = t.S3.URL(), t.S3.Endpoint
		}
		s.Tiers = append(s.Tiers, ts)
		if !ts.Online {
			if t.IsObject() {
				ts.Error = m.offline(t).Error() // the server's answer: refused, denied, no such bucket
			}
			continue
		}
		all, err := m.scan(t)
		if err != nil {
			ts.Error = err.Error()
			continue
		}
		scans[t] = all
		if ts.Room, err = m.Room(t); err != nil {
			ts.Error = err.Error()
		}
		st, err := m.readTierState(t)
		if err != nil {
			ts.Error = err.Error()
			st = &tierState{}
		}
		current := m.currentOn(t)
		for _, a := range all {
			as := &ArtifactStatus{Name: a.Name, Kind: a.Kind, Size: a.Size, Files: len(a.Files), Verification: VerifiedState, LastUseUnix: st.LastUse[a.Name]}
			for _, f := range a.Files {
				e, ok := st.Digests[f.Rel]
				switch {
				case !ok:
					as.Verification = UnverifiedState
				case !current(f.Rel, e):
					if as.Verification == VerifiedState {
						as.Verification = StaleState
					}
				case as.VerifiedUnix == 0 || e.Verified < as.VerifiedUnix:
					as.VerifiedUnix = e.Verified
				}
			}
			if as.Verification != VerifiedState {
				as.VerifiedUnix = 0
			}
			ts.Artifacts = append(ts.Artifacts, as)
		}
		if t.IsObject() {
			continue // no records: an object tier's operations are kept on their local end
		}
		js, err := readJournals(m.FS, t.Root)
		if err != nil {
			ts.Error = err.Error()
		}
		for _, j := range js {
			op := Recovered{ID: j.ID, Op: j.Op, Artifact: j.Artifact, From: j.Source.Tier, To: j.Dest.Tier, Step: j.Step, Outcome: OutcomePending}
			running, err := m.journalRunning(j)
			if err != nil {
				ts.Error = err.Error()
			}
			if running {
				op.Outcome = OutcomeRunning
			}
			s.Pending = append(s.Pending, op)
		}
	}
	for i, t := range m.Config.Tiers {
		for _, as := range s.Tiers[i].Artifacts {
			a, _ := findIn(scans[t], as.Name)
			for _, o := range m.Config.Tiers {
				if o == t {
					continue
				}
				if b, ok := findIn(scans[o], as.Name); ok && m.checkStructure(t, a, o, b) == nil {
					as.Twins = append(as.Twins, o.Name)
				}
			}
		}
	}
	return s, nil
}

func findIn(all []*Artifact, name string) (*Artifact, bool) {
	for _, a := range all {
		if a.Name == name {
			return a, true
		}
	}
	return nil, false
}

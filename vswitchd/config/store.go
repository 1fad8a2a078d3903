package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/vswitch-go/vswitch/internal/statedir"
)

// StateFile is the name of the committed state inside the store directory.
const StateFile = "config.json"

// tempPrefix names the files a write goes through before the rename; any
// left in the directory belong to a write that crashed before committing.
const tempPrefix = ".config.json.tmp-"

// lockFileName holds an exclusive flock so that two daemons pointed at the
// same state directory cannot silently overwrite each other's commits.
const lockFileName = "config.lock"

// fileFormatVersion lets a future layout refuse to misread an old file.
const fileFormatVersion = 1

// ErrClosed is returned by Update after Close.
var ErrClosed = errors.New("config: store is closed")

// stateFile is the on-disk envelope around a Config.
type stateFile struct {
	Format     int     `json:"format"`
	Generation uint64  `json:"generation"`
	Config     *Config `json:"config"`
}

// Store is the crash-safe configuration: every successful Update is on
// stable storage before it returns, and Open brings back the last one.
type Store struct {
	dir  string
	path string
	lock *os.File

	mu     sync.Mutex
	cur    *Config
	gen    uint64
	closed bool
	// broken is set when a commit reached the directory but could not be
	// made durable: memory and disk may disagree, so further writes are
	// refused rather than built on an unknown base.
	broken error
	// unwritten is why the last write of a change ApplyUpdate kept in
	// memory failed (nil when it has not failed); pending is set while
	// such a change is not in the file.
	unwritten error
	pending   bool
	// legacy are the saved tables an older daemon kept in config.json,
	// by bridge, until ForgetLegacyTables: no update is written before,
	// as it would drop them.
	legacy map[string]*Tables
}

// Open loads the latest committed state from dir (creating dir, mode 0700,
// and an empty state if there is none). Leftovers of an interrupted write
// are removed; a corrupt state file is reported and left untouched for
// inspection. A directory others can write, or owned by another user, is
// refused (statedir.Check): whoever can write it could plant a symlink
// that makes the daemon overwrite another file. No file in it is opened
// through a symlink.
func Open(dir string) (*Store, error) {
	if err := statedir.Ensure(dir); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, path: filepath.Join(dir, StateFile), lock: lock}
	if err := s.load(); err != nil {
		lock.Close()
		return nil, err
	}
	return s, nil
}

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := statedir.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("config: open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("config: state directory %s is in use by another process (%s is locked)", dir, path)
		}
		return nil, fmt.Errorf("config: lock %s: %w", path, err)
	}
	return f, nil
}

func (s *Store) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("config: read state directory: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			// A rename never happened for this file, so it was never
			// acknowledged: discard it without reading it.
			if err := os.Remove(filepath.Join(s.dir, e.Name())); err != nil {
				return fmt.Errorf("config: remove interrupted write: %w", err)
			}
		}
	}

	data, err := statedir.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.cur, s.gen = &Config{}, 0
		return nil
	}
	if err != nil {
		return fmt.Errorf("config: read state file: %w", err)
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("config: state file %s is corrupt (left untouched): %w", s.path, err)
	}
	if f.Format != fileFormatVersion {
		return fmt.Errorf("config: state file %s has format %d, this build reads format %d", s.path, f.Format, fileFormatVersion)
	}
	if f.Config == nil {
		return fmt.Errorf("config: state file %s is corrupt (left untouched): no config object", s.path)
	}
	if err := Validate(f.Config); err != nil {
		return fmt.Errorf("config: state file %s is invalid (left untouched): %w", s.path, err)
	}
	var legacy struct {
		Config struct {
			Bridges map[string]*Tables `json:"bridges"`
		} `json:"config"`
	}
	if err := json.Unmarshal(data, &legacy); err != nil {
		return fmt.Errorf("config: state file %s is corrupt (left untouched): %w", s.path, err)
	}
	for name, t := range legacy.Config.Bridges {
		if t != nil && (t.Flows != nil || len(t.Groups) > 0 || len(t.Meters) > 0) && f.Config.Bridges[name] != nil {
			if s.legacy == nil {
				s.legacy = map[string]*Tables{}
			}
			s.legacy[name] = t
		}
	}
	s.cur, s.gen = f.Config, f.Generation
	return nil
}

// LegacyTables are the saved tables config.json held, by bridge, if an
// older daemon wrote it: the caller moves them to where it keeps tables,
// durably, then calls ForgetLegacyTables. Until then the store takes no
// update.
func (s *Store) LegacyTables() map[string]*Tables {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.legacy
}

// ForgetLegacyTables writes config.json without the tables LegacyTables
// returned.
func (s *Store) ForgetLegacyTables() error {
	s.mu.Lock()
	legacy := s.legacy
	s.legacy = nil
	s.mu.Unlock()
	if legacy == nil {
		return nil
	}
	if _, err := s.Update(func(*Config) error { return nil }); err != nil {
		s.mu.Lock()
		s.legacy = legacy
		s.mu.Unlock()
		return err
	}
	return nil
}

// Get returns a deep copy of the committed state.
func (s *Store) Get() *Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Clone()
}

// DatapathID is DatapathID of bridge name in the committed state, and
// false when there is no such bridge or its datapath-id does not parse.
// It reads the state in place: the OVSDB write-back asks for every
// bridge's at each pass, and Get's deep copy of a state with 1,000 ports
// was most of the daemon's idle allocation.
func (s *Store) DatapathID(name string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.cur.Bridges[name]
	if b == nil {
		return 0, false
	}
	id, err := DatapathID(b)
	return id, err == nil
}

// HasBridge says whether the committed state has bridge name.
func (s *Store) HasBridge(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Bridges[name] != nil
}

// Generation returns the number of the last committed Update; it only grows.
func (s *Store) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Snapshot returns a deep copy of the committed state and its generation,
// taken atomically with respect to Update.
func (s *Store) Snapshot() (*Config, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Clone(), s.gen
}

// Check judges next as Update would judge it coming after old, without
// storing it: it returns next with its defaults filled in and its ports
// numbered, or why Update would refuse it.
func Check(old, next *Config) (*Config, error) {
	n := next.Clone()
	fillDefaults(n)
	if err := assignOFPorts(old, n); err != nil {
		return nil, err
	}
	if err := Validate(n); err != nil {
		return nil, err
	}
	return n, nil
}

// Update runs fn on a copy of the state, fills in defaults and OpenFlow port
// numbers, validates the result and commits it durably. If fn, port
// assignment, validation or the write fails, the state is unchanged. The
// returned Config is the caller's own copy of the committed state.
//
// OFPort is owned by the store: a new port gets its OFPortRequest if free
// (else the Update fails) or the lowest free number, an existing port keeps
// its number unless its OFPortRequest changes. What fn writes into the
// OFPort of a new port without a request is a preference, taken if free
// (the number the database reported for it before a restart); into any
// other port's, ignored.
func (s *Store) Update(fn func(c *Config) error) (*Config, error) {
	return s.update(fn, false)
}

// ApplyUpdate is Update for a configuration whose record is elsewhere
// (the OVSDB database the daemon follows, which has the change durably
// before the daemon sees it): the change is made in memory only, and the
// file gets it at the next Update or Flush, which the caller runs soon,
// off the path of the change (a write and two fsyncs were 1-6 ms of an
// add-port); Unwritten says it is not written yet, or why a write
// failed (a full disk). A change Validate refuses, or a store that can no
// longer be trusted, fails as in Update.
func (s *Store) ApplyUpdate(fn func(c *Config) error) (*Config, error) {
	return s.update(fn, true)
}

// ErrNotWritten is what Unwritten says of a change ApplyUpdate made that
// no Flush has tried to write yet.
var ErrNotWritten = errors.New("config: not written yet")

// Unwritten is why the state in memory is not in the file, or nil:
// ErrNotWritten, or the error of the last write that failed.
func (s *Store) Unwritten() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unwritten == nil && s.pending {
		return ErrNotWritten
	}
	return s.unwritten
}

// Flush writes the state ApplyUpdate left in memory, if any.
func (s *Store) Flush() error {
	s.mu.Lock()
	pending := s.pending
	s.mu.Unlock()
	if !pending {
		return nil
	}
	_, err := s.Update(func(*Config) error { return nil })
	return err
}

func (s *Store) update(fn func(c *Config) error, inMemory bool) (*Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.broken != nil {
		return nil, s.broken
	}
	if s.legacy != nil {
		return nil, errors.New("config: the saved tables in config.json are not moved out of it yet")
	}
	next := s.cur.Clone()
	if err := fn(next); err != nil {
		return nil, err
	}
	fillDefaults(next)
	if err := assignOFPorts(s.cur, next); err != nil {
		return nil, err
	}
	if err := Validate(next); err != nil {
		return nil, err
	}
	if inMemory {
		s.pending = true
	} else {
		data, err := json.MarshalIndent(stateFile{Format: fileFormatVersion, Generation: s.gen + 1, Config: next}, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("config: encode state: %w", err)
		}
		if err := s.commit(append(data, '\n')); err != nil {
			if s.pending {
				s.unwritten = err
			}
			return nil, err // an earlier change may still be unwritten
		}
		s.unwritten, s.pending = nil, false
	}
	// Keep a private copy: fn may still hold a pointer into next.
	s.cur = next.Clone()
	s.gen++
	return next, nil
}

// commit makes data the state file (statedir.ReplaceFile: after a crash
// the file is either the old or the new state in full). The rename
// replaces a symlink at s.path rather than writing through it. Once the
// file is renamed but its directory not synced, the state on disk may go
// back after a crash: the store refuses further updates.
func (s *Store) commit(data []byte) error {
	err := statedir.ReplaceFile(s.path, filepath.Join(s.dir, tempPrefix+"w"), data, 0o600)
	if errors.Is(err, statedir.ErrDirNotSynced) {
		s.broken = fmt.Errorf("config: state in %s may not be durable, refusing further updates: %w", s.dir, err)
		return s.broken
	}
	if err != nil {
		return fmt.Errorf("config: write %s: %w", s.path, err)
	}
	return nil
}

// Close releases the directory lock; the store refuses Updates afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.lock.Close()
}

// fillDefaults supplies what a caller may leave out: names from map keys
// and the standalone fail mode.
func fillDefaults(c *Config) {
	for bname, b := range c.Bridges {
		if b == nil {
			continue
		}
		if b.Name == "" {
			b.Name = bname
		}
		if b.FailMode == "" {
			b.FailMode = FailModeStandalone
		}
		for pname, p := range b.Ports {
			if p != nil && p.Name == "" {
				p.Name = pname
			}
		}
	}
}

// assignOFPorts gives each port of next its OpenFlow number, carrying the
// numbers of ports that old already had in the same bridge. Requests are
// honoured before free numbers are handed out so that a request made in
// the same Update is not taken by a port added alongside it.
func assignOFPorts(old, next *Config) error {
	for _, bname := range sortedKeys(next.Bridges) {
		b := next.Bridges[bname]
		if b == nil {
			continue
		}
		var oldPorts map[string]*Port
		if ob := old.Bridges[bname]; ob != nil {
			oldPorts = ob.Ports
		}
		names := sortedKeys(b.Ports)
		used := map[uint32]string{}
		var pending, preferring []*Port
		for _, pname := range names {
			p := b.Ports[pname]
			if p == nil {
				continue
			}
			op := oldPorts[pname]
			if op == nil && p.OFPortRequest == 0 && p.OFPort != 0 && p.OFPort <= MaxOFPort {
				preferring = append(preferring, p)
				continue
			}
			p.OFPort = 0
			if op != nil {
				p.OFPort = op.OFPort
			}
			if p.OFPortRequest != 0 && p.OFPortRequest != p.OFPort {
				pending = append(pending, p)
				p.OFPort = 0
				continue
			}
			if p.OFPort != 0 {
				used[p.OFPort] = pname
			} else {
				pending = append(pending, p)
			}
		}
		// Requests first, in name order; then preferences, if free.
		sort.SliceStable(pending, func(i, j int) bool {
			return (pending[i].OFPortRequest != 0) && (pending[j].OFPortRequest == 0)
		})
		requests := 0
		for requests < len(pending) && pending[requests].OFPortRequest != 0 {
			requests++
		}
		for _, p := range preferring {
			if _, ok := used[p.OFPort]; ok || requested(pending[:requests], p.OFPort) {
				p.OFPort = 0
				pending = append(pending, p)
				continue
			}
			used[p.OFPort] = p.Name
		}
		next := uint32(1)
		for _, p := range pending {
			if req := p.OFPortRequest; req != 0 {
				if req > MaxOFPort {
					return fmt.Errorf("bridge %q: port %q: ofport_request %d outside 1..%d", bname, p.Name, req, MaxOFPort)
				}
				if other, ok := used[req]; ok {
					return fmt.Errorf("bridge %q: port %q: ofport_request %d is already used by port %q", bname, p.Name, req, other)
				}
				p.OFPort = req
				used[req] = p.Name
				continue
			}
			for {
				if _, ok := used[next]; !ok {
					break
				}
				next++
			}
			if next > MaxOFPort {
				return fmt.Errorf("bridge %q: no free OpenFlow port number for port %q", bname, p.Name)
			}
			p.OFPort = next
			used[next] = p.Name
		}
	}
	return nil
}

// requested says whether one of ports asks for number n.
func requested(ports []*Port, n uint32) bool {
	return slices.ContainsFunc(ports, func(p *Port) bool { return p.OFPortRequest == n })
}

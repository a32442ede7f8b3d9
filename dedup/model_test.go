package dedup

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// model is the window's specification in the plainest form: entries
// in insertion order, the oldest first.
type model struct {
	entries          []Key
	dead             []bool
	maxKeys          int
	evicted, expired uint64
}

func (m *model) live() int {
	n := 0
	for i := range m.entries {
		if !m.dead[i] {
			n++
		}
	}
	return n
}

func (m *model) lookup(key string, now int64) (Entry, bool) {
	for i := len(m.entries) - 1; i >= 0; i-- {
		if !m.dead[i] && m.entries[i].Key == key {
			if m.entries[i].Expires <= now {
				return Entry{}, false
			}
			return m.entries[i].Entry, true
		}
	}
	return Entry{}, false
}

func (m *model) pop() {
	m.entries, m.dead = m.entries[1:], m.dead[1:]
}

func (m *model) expire(now int64) {
	for len(m.entries) > 0 {
		if !m.dead[0] {
			if m.entries[0].Expires > now {
				return
			}
			m.expired++
		}
		m.pop()
	}
}

func (m *model) insert(k Key, now int64) {
	m.expire(now)
	for m.live() >= m.maxKeys {
		for m.dead[0] {
			m.pop()
		}
		m.pop()
		m.evicted++
	}
	for i := range m.entries {
		if !m.dead[i] && m.entries[i].Key == k.Key {
			m.dead[i] = true
		}
	}
	m.entries = append(m.entries, k)
	m.dead = append(m.dead, false)
}

func (m *model) keys() []Key {
	out := []Key{}
	for i, k := range m.entries {
		if !m.dead[i] {
			out = append(out, k)
		}
	}
	return out
}

// modelKey names key id: lengths from 2 bytes to 1 KiB (the longest key
// allowed), so keys fill arena blocks at all paces and often reach a
// block's end.
func modelKey(id int) string {
	return fmt.Sprintf("k%d%s", id, strings.Repeat("p", id*37%1000))
}

// TestWindowModel runs random inserts, lookups, expiries, bound
// changes and snapshot round trips against model. Few distinct keys
// and windows of varying length make keys come back after expiry and
// index probe runs wrap and shift.
//
// With seeds 9 to 16 every key hashes to one of 4 home buckets, so most
// keys live outside their home bucket: buckets overflow, and sweeps must
// recompute the overflow marks and keep every key findable.
//
// Views (snapshots) are taken at random points and encoded many operations
// later, which must give the keys the model held when each was taken: the
// window must never write what an outstanding view reads.
func TestWindowModel(t *testing.T) {
	type heldView struct {
		v    *View
		want []byte
	}
	checkView := func(seed int64, op int, hv heldView) {
		t.Helper()
		var got bytes.Buffer
		if n, err := hv.v.WriteTo(&got); err != nil || n != int64(got.Len()) {
			t.Fatalf("seed %d op %d: view WriteTo = %d, %v", seed, op, n, err)
		}
		if !bytes.Equal(got.Bytes(), hv.want) || hv.v.Len() != int64(len(hv.want)) {
			t.Fatalf("seed %d op %d: view (len %d) encodes\n%x\nwant\n%x", seed, op, hv.v.Len(), got.Bytes(), hv.want)
		}
		hv.v.Release()
	}
	for seed := int64(1); seed <= 16; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		maxKeys := 1 + rng.IntN(300)
		start := uint64(1)
		if seed%2 == 0 {
			start = 1<<32 - uint64(rng.IntN(3000)) // sequences wrap 32 bits
		}
		hashMask := ^uint64(0)
		if seed > 8 {
			hashMask = 3<<32 | 0xffffffff
		}
		win := newWindowAt(maxKeys, start)
		win.hashMask = hashMask
		m := &model{maxKeys: maxKeys}
		var views []heldView
		now := int64(0)
		nkeys := 10 + rng.IntN(2000)
		for op := 0; op < 8_000; op++ {
			now += int64(rng.IntN(3))
			key := modelKey(rng.IntN(nkeys))
			switch r := rng.IntN(100); {
			case r < 50:
				batch := []Key{{Key: key}}
				for range rng.IntN(4) {
					batch = append(batch, Key{Key: modelKey(rng.IntN(nkeys))})
				}
				wantHeld := ""
				for i := range batch {
					batch[i].Offset = int64(op*10 + i)
					batch[i].Partition = int32(i)
					batch[i].Digest = Digest{byte(op), byte(i)}
					batch[i].Expires = now + 1 + int64(rng.IntN(400))
					if _, ok := m.lookup(batch[i].Key, now); ok && wantHeld == "" {
						wantHeld = batch[i].Key
					}
				}
				if rng.IntN(2) == 0 {
					// The state machine's path: all or nothing.
					held, ok := win.Admit(now, batch)
					if held != wantHeld || ok != (wantHeld == "") {
						t.Fatalf("seed %d op %d: Admit = %q %v, want %q", seed, op, held, ok, wantHeld)
					}
					if !ok {
						continue
					}
				} else {
					if wantHeld != "" {
						continue // callers insert only keys not held
					}
					win.insertAll(now, batch)
				}
				for i := range batch {
					m.insert(batch[i], now)
				}
			case r < 85:
				got, gok := win.Lookup(key, now)
				want, wok := m.lookup(key, now)
				if got != want || gok != wok {
					t.Fatalf("seed %d op %d: Lookup(%s, %d) = %+v %v, want %+v %v", seed, op, key, now, got, gok, want, wok)
				}
			case r < 90:
				win.Expire(now)
				m.expire(now)
			case r < 92:
				maxKeys = 1 + rng.IntN(300)
				win.SetMaxKeys(maxKeys)
				m.maxKeys = maxKeys
			case r < 94 && seed%3 != 0: // seeds 3, 6, …: one window throughout, for the long-lived view
				// A snapshot and its restore, as the state machine does
				// them; the restored window then takes the test's hash
				// mask again.
				v := win.View()
				var snap bytes.Buffer
				n, err := v.WriteTo(&snap)
				v.Release()
				if err != nil {
					t.Fatalf("seed %d op %d: write window: %v", seed, op, err)
				}
				if win, err = ReadWindow(&snap, n, maxKeys); err != nil {
					t.Fatalf("seed %d op %d: read window: %v", seed, op, err)
				}
				win.mu.Lock()
				win.hashMask = hashMask
				win.rebuildLocked()
				win.mu.Unlock()
				m.evicted, m.expired = 0, 0 // counters are per process, not snapshotted
			case r < 96:
				// The first view lives to the end, past chunks the window
				// drops and makes again.
				if len(views) < 3 {
					views = append(views, heldView{win.View(), encodeKeys(m.keys())})
				} else {
					i := 1 + rng.IntN(len(views)-1)
					checkView(seed, op, views[i])
					views = slices.Delete(views, i, i+1)
				}
			case r < 97:
				// Sweeps run every len(index) inserts; restores and resizes
				// here come sooner, so sweep at random points as well.
				win.mu.Lock()
				win.sweepLocked()
				win.mu.Unlock()
			default:
				st := win.Stats()
				if st.Keys != m.live() || st.Evicted != m.evicted || st.Expired != m.expired {
					t.Fatalf("seed %d op %d: stats %+v, want keys %d evicted %d expired %d", seed, op, st, m.live(), m.evicted, m.expired)
				}
				if got, want := win.Keys(), m.keys(); !slices.Equal(got, want) {
					t.Fatalf("seed %d op %d: keys\n%v\nwant\n%v", seed, op, got, want)
				}
			}
		}
		for _, hv := range views {
			checkView(seed, -1, hv)
		}
	}
}

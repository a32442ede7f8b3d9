package nemesis

import (
	"errors"
	"fmt"
)

// Target is where a node listens: the addresses its peers would dial
// without proxies.
type Target struct {
	// Raft is the node's Raft transport address.
	Raft string
	// API is the node's client API address.
	API string
}

// Net is a proxy for every ordered pair of nodes and each of their two
// channels (Raft and the client API), so that one direction of one link
// can be cut, dropped or delayed: node i reaches node j only through
// Route(i, j). Nodes are numbered by their index in the targets given to
// StartNet. Methods are safe for concurrent use.
type Net struct {
	n int
	// proxies[i][j] are node i's proxies to node j (nil for i == j).
	proxies [][]*pair
}

// pair is one direction of one link: both channels.
type pair struct{ raft, api *Proxy }

func (p *pair) each(f func(*Proxy)) { f(p.raft); f(p.api) }

// StartNet starts n·(n−1)·2 proxies for the nodes at targets. seed seeds
// the proxies' loss and jitter draws.
func StartNet(targets []Target, seed uint64) (*Net, error) {
	nt := &Net{n: len(targets), proxies: make([][]*pair, len(targets))}
	for i := range targets {
		nt.proxies[i] = make([]*pair, len(targets))
		for j, to := range targets {
			if i == j {
				continue
			}
			s := seed ^ uint64(i*len(targets)+j)<<32
			raft, err := StartProxy(to.Raft, s)
			if err != nil {
				nt.Close()
				return nil, err
			}
			api, err := StartProxy(to.API, s+1)
			if err != nil {
				raft.Close()
				nt.Close()
				return nil, err
			}
			nt.proxies[i][j] = &pair{raft: raft, api: api}
		}
	}
	return nt, nil
}

// Size is the number of nodes.
func (nt *Net) Size() int { return nt.n }

// Route returns the addresses node from dials to reach node to.
func (nt *Net) Route(from, to int) Target {
	p := nt.proxies[from][to]
	return Target{Raft: p.raft.Addr(), API: p.api.Addr()}
}

// Set sets the link from node from to node to (both channels). It
// affects what from sends on connections it dials to to, and the answers
// on them; to's own connections to from go through Set(to, from).
func (nt *Net) Set(from, to int, l Link) {
	nt.proxies[from][to].each(func(p *Proxy) { p.Set(l) })
}

// Link returns the link from node from to node to.
func (nt *Net) Link(from, to int) Link { return nt.proxies[from][to].raft.Link() }

// Cut cuts both directions between every node of a and every node of b.
func (nt *Net) Cut(mode CutMode, a, b []int) {
	for _, i := range a {
		for _, j := range b {
			if i != j {
				nt.Set(i, j, Link{Cut: mode})
				nt.Set(j, i, Link{Cut: mode})
			}
		}
	}
}

// Heal opens every link.
func (nt *Net) Heal() {
	nt.all(func(p *Proxy) { p.Set(Link{}) })
}

// Stats returns the counters of the proxies from node from to node to:
// Raft's, then the API's.
func (nt *Net) Stats(from, to int) (raft, api ProxyStats) {
	p := nt.proxies[from][to]
	return p.raft.Stats(), p.api.Stats()
}

// Close stops every proxy.
func (nt *Net) Close() error {
	var errs []error
	nt.all(func(p *Proxy) {
		if err := p.Close(); err != nil {
			errs = append(errs, fmt.Errorf("proxy to %s: %w", p.Target(), err))
		}
	})
	return errors.Join(errs...)
}

func (nt *Net) all(f func(*Proxy)) {
	for _, row := range nt.proxies {
		for _, p := range row {
			if p != nil {
				p.each(f)
			}
		}
	}
}

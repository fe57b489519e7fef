package rig

import (
	"errors"
	"strings"

	"github.com/lockgate/lockgate/redistest"
)

// deployment is the Redis side of a run: the servers of the topology, and
// in front of each server one proxy per worker process — its own path to
// that server, so that a fault can slow one worker's replies, or every
// worker's (a network fault of the server: all its proxies).
type deployment struct {
	topology string
	srvs     []*redistest.Server  // every redis-server the workers talk to
	cluster  *redistest.Cluster   // cluster topology
	st       *redistest.Sentinel  // sentinel topology
	proxies  [][]*redistest.Proxy // [worker][server]: worker's proxy in front of srvs[server]
	addrs    []string             // what a worker is given to find Redis (-redis)
	master   string               // Sentinel master name
}

// newDeployment starts the servers of topology and a proxy per server for
// each of workers processes.
func newDeployment(topology string, workers int) (d *deployment, err error) {
	d = &deployment{topology: topology}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	switch topology {
	case "sentinel":
		d.st, err = redistest.NewSentinel()
		if err != nil {
			return nil, err
		}
		d.srvs = []*redistest.Server{d.st.Master, d.st.Replica}
		d.addrs, d.master = d.st.SentinelAddrs, d.st.MasterName
	case "cluster":
		d.cluster, err = redistest.NewCluster(3)
		if err != nil {
			return nil, err
		}
		d.srvs = d.cluster.Servers
		d.addrs = d.cluster.Addrs
	default:
		n := 1
		if topology == "redlock" {
			n = 3
		}
		for range n {
			srv, err := redistest.NewServer()
			if err != nil {
				return nil, err
			}
			d.srvs = append(d.srvs, srv)
			d.addrs = append(d.addrs, srv.Addr)
		}
	}
	for range workers {
		var ps []*redistest.Proxy
		for _, s := range d.srvs {
			p, err := redistest.NewProxy(s.Addr)
			if err != nil {
				return nil, err
			}
			ps = append(ps, p)
		}
		d.proxies = append(d.proxies, ps)
	}
	return d, nil
}

// routes is worker w's -routes: each server's address to w's proxy.
func (d *deployment) routes(w int) string {
	var r []string
	for i, s := range d.srvs {
		r = append(r, s.Addr+"="+d.proxies[w][i].Addr)
	}
	return strings.Join(r, ",")
}

// proxiesOf returns every worker's proxy in front of srvs[i].
func (d *deployment) proxiesOf(i int) []*redistest.Proxy {
	var out []*redistest.Proxy
	for _, ps := range d.proxies {
		out = append(out, ps[i])
	}
	return out
}

func (d *deployment) close() error {
	var errs []error
	for _, ps := range d.proxies {
		for _, p := range ps {
			errs = append(errs, p.Close())
		}
	}
	switch {
	case d.st != nil:
		errs = append(errs, d.st.Close())
	case d.cluster != nil:
		errs = append(errs, d.cluster.Close())
	default:
		for _, s := range d.srvs {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

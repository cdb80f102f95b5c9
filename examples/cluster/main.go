// Command cluster runs a didnmf cluster in one process the way separate machines would run it:
// three member nodes that find each other by gossip (each would be `didnmf serve` on its own
// machine), and a client that finds them through a member's front door (its gossip port;
// clients take no part in the gossip) and submits a job, which the cluster places on its
// members. The client streams the input to the shards (the members
// need not see the file). Cancel with Ctrl-C.
//
//	go run ./examples/cluster [input-spec-or-path] [rank]
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/didnmf/didnmf"
)

func main() {
	input, rank := "synthetic:m=20,n=200000,k=4,seed=1,noise=0.01", 4
	if len(os.Args) > 1 {
		input = os.Args[1]
	}
	if len(os.Args) > 2 {
		r, err := strconv.Atoi(os.Args[2])
		if err != nil {
			log.Fatalf("rank: %v", err)
		}
		rank = r
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := factorize(ctx, input, rank, 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d iterations, %s, rel_err2 %.4g\n", input, res.Iterations, res.StopReason, res.RelErr2())
	for s, node := range res.ShardNodes {
		fmt.Printf("  shard %d ran on %s\n", s, node)
	}
}

// factorize starts n member nodes on loopback, reaches them as a client and runs DID with 6
// shards on them, streaming the input from the client.
func factorize(ctx context.Context, input string, rank, n int) (*didnmf.Result, error) {
	var members []*didnmf.Member
	defer func() {
		for _, m := range members {
			_ = m.Leave(time.Second) // graceful: the others see a leave, not a failure
		}
	}()
	// Every member and client proves it holds the cluster's secret (here a fresh one; `node
	// serve` keeps one in a file, see `didnmf serve -h`).
	secret := didnmf.NewSecret()
	for i := 0; i < n; i++ {
		cfg := didnmf.LocalNode() // on loopback; a member on a machine of its own starts from LANNode
		cfg.Name, cfg.Secret = fmt.Sprintf("member-%d", i+1), secret
		if i > 0 {
			cfg.Join = []string{members[0].Gossip()} // any live member will do
		}
		m, err := didnmf.Serve(cfg)
		if err != nil {
			return nil, err
		}
		members = append(members, m)
	}
	// Gossip converges in milliseconds on loopback: wait until the first member sees them all.
	for len(members[0].Members.Workers()) < n {
		time.Sleep(10 * time.Millisecond)
	}
	// The client asks a member's front door (at its gossip address) for the members; it takes
	// no part in the gossip. It streams the input to the shards.
	spec := didnmf.NewSpec([]string{input}, didnmf.DID, rank, 6)
	spec.Stop.Tol, spec.Stop.MaxIter = 1e-6, 500
	spec.Ingest = didnmf.IngestStream
	target := didnmf.OnCluster(didnmf.ClusterConfig{Cluster: []string{members[0].Gossip()}, Secret: secret})
	return didnmf.Run(ctx, spec, target, didnmf.Options{Progress: func(p didnmf.Progress) {
		if p.Iteration%100 == 0 {
			fmt.Printf("iteration %4d  objective ratio %.3e\n", p.Iteration, p.Ratio)
		}
	}})
}

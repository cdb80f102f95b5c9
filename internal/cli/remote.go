package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/didnmf/didnmf/cluster"
	"github.com/didnmf/didnmf/internal/server"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/pki"
)

// clientConfig returns the settings of a client of the cluster whose members' front doors
// are at addrs (their gossip addresses; a client takes no part in the gossip).
func clientConfig(addrs string, sec *securityFlags, bind string, stderr io.Writer) (server.ClientConfig, error) {
	cr, err := sec.credentials(stderr, false)
	if err != nil {
		return server.ClientConfig{}, err
	}
	return server.ClientConfig{Cluster: splitList(addrs), Bind: bind, TLS: cr.tls, Secret: cr.secret, Insecure: cr.insecure}, nil
}

// connect connects to the cluster at addrs as a client: it asks the members' front doors
// there for the members, and takes no part in the gossip. A host that does not resolve, or addresses
// at which nothing answered for server.DefaultReach, are usage errors (see clusterErr).
func connect(addrs string, sec *securityFlags, bind string, stderr io.Writer) (*server.Client, error) {
	cfg, err := clientConfig(addrs, sec, bind, stderr)
	if err != nil {
		return nil, err
	}
	c, err := server.Connect(cfg)
	if err != nil {
		return nil, clusterErr(addrs, err)
	}
	return c, nil
}

// cmdStatus lists a cluster's members, their load and their running jobs.
func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	addr := fs.String("cluster", "", "gossip address `IP:PORT` of any member (comma-separated for several); tried for "+server.DefaultReach.String()+" while nothing answers")
	asJSON := fs.Bool("json", false, "print JSON")
	bind := fs.String("client-bind", "", "`IP` this client listens on (default: the address that routes to the cluster)")
	var sec securityFlags
	sec.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf status --cluster IP:PORT [flags]\n\n"+
			"lists the cluster's members (clients are not members) with their version, cores, memory, load and\nrunning jobs (a client sees only its own), and warns when the members run different versions\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *addr == "" {
		return badInput("--cluster is required")
	}
	c, err := connect(*addr, &sec, *bind, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	st := c.Status(3 * time.Second)
	type row struct {
		Name     string   `json:"name"`
		Role     string   `json:"role"`
		Gossip   string   `json:"gossip"`
		Actor    string   `json:"actor"`
		Cores    int      `json:"cores"`
		Capacity int      `json:"capacity"`
		Memory   int64    `json:"memory"`
		Reserved int64    `json:"reserved"`
		Actors   int64    `json:"actors"`
		Jobs     []string `json:"jobs"`
		// Version is the build the member runs, as it advertises it ("": a build from before
		// versions were advertised); HTTP the base URL of its dashboard and API ("": none).
		Version string `json:"version"`
		HTTP    string `json:"http,omitempty"`
		// Drops are what the member refused from the network, by cause (peers only).
		Drops []string `json:"drops,omitempty"`
		Error string   `json:"error,omitempty"`
	}
	var rows []row
	for _, s := range st { // the members: clients are not in the cluster's view
		r := row{Name: s.Member.Name, Role: s.Member.Meta.Role.String(), Gossip: s.Member.Gossip, Actor: s.Member.Meta.Actor,
			Cores: s.Member.Meta.Cores, Capacity: s.Member.Meta.Capacity, Memory: s.Member.Meta.Memory, Jobs: []string{},
			Version: s.Member.Meta.Version, HTTP: s.Member.Meta.HTTP}
		if s.Load != nil {
			r.Reserved, r.Actors, r.Jobs, r.Drops = s.Load.Reserved, s.Load.Actors, append(r.Jobs, s.Load.JobIds...), s.Load.Drops
		} else if s.Err != nil {
			r.Error = s.Err.Error()
		}
		rows = append(rows, r)
	}
	// The jobs' progress: this client's own (a node's credentials see every job).
	jobs, _ := c.Jobs(3 * time.Second)
	if jobs == nil {
		jobs = []*messages.JobInfo{}
	}
	versions := make([]memberVersion, len(rows))
	for i, r := range rows {
		versions[i] = memberVersion{r.Name, r.Version}
	}
	warnings := []string{}
	if w := versionWarning(versions); w != "" {
		warnings = append(warnings, w)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"members": rows, "jobs": jobs, "warnings": warnings})
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tGOSSIP\tACTOR\tVERSION\tCORES\tCAPACITY\tMEMORY\tRESERVED\tACTORS\tJOBS")
	for _, r := range rows {
		jobs := fmt.Sprint(len(r.Jobs))
		if len(r.Jobs) > 0 {
			jobs += " " + fmt.Sprint(r.Jobs)
		}
		if r.Error != "" {
			jobs = "unreachable: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%s\n", r.Name, r.Role, r.Gossip, r.Actor, shownVersion(r.Version), r.Cores, r.Capacity,
			cluster.FormatBytes(r.Memory), cluster.FormatBytes(r.Reserved), r.Actors, jobs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rows {
		if len(r.Drops) > 0 {
			fmt.Fprintf(stdout, "%s refused: %s\n", r.Name, strings.Join(r.Drops, ", "))
		}
	}
	for _, r := range rows {
		if r.HTTP != "" {
			fmt.Fprintf(stdout, "%s serves its dashboard and API at %s\n", r.Name, r.HTTP)
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	fmt.Fprintln(stdout, "\nyour jobs:")
	return printJobs(stdout, jobs, false)
}

// memberVersion is a member's name and the version it advertises.
type memberVersion struct{ name, version string }

// shownVersion is a member's version as status shows it: "unknown" for a build from before
// versions were advertised.
func shownVersion(v string) string {
	if v == "" {
		return "unknown"
	}
	return v
}

// versionWarning returns the warning about members that run different versions, "" when they
// all run one: each version with its members, the versions and the names sorted, e.g.
// "the members run 2 different versions: v0.4.0 (a, b); v0.5.0 (c); run one build on every node".
func versionWarning(members []memberVersion) string {
	on := map[string][]string{}
	for _, m := range members {
		on[m.version] = append(on[m.version], m.name)
	}
	if len(on) < 2 {
		return ""
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(on)) {
		names := on[v]
		slices.Sort(names)
		parts = append(parts, fmt.Sprintf("%s (%s)", shownVersion(v), strings.Join(names, ", ")))
	}
	return fmt.Sprintf("the members run %d different versions: %s; run one build on every node",
		len(on), strings.Join(parts, "; "))
}

// cmdCerts makes a cluster's certificate authority (once) and a certificate for a node.
func cmdCerts(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "certs", "`DIR` holding ca.pem and ca-key.pem (made on first use) and the node certificates")
	name := fs.String("name", "", "node `NAME`: writes NAME.pem and NAME-key.pem")
	hosts := fs.String("hosts", "127.0.0.1", "comma-separated IP addresses and host names the node (or client) is reached at")
	client := fs.Bool("client", false, "make a client certificate: it may submit jobs and list, watch and cancel its own, nothing else")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf certs --name NAME --hosts IP,... [--client] [--dir DIR]\n\nmakes mutual-TLS files for serve (peer certificates) and factorize --cluster, status, jobs and cancel (--client):\n  --tls-ca DIR/ca.pem --tls-cert DIR/NAME.pem --tls-key DIR/NAME-key.pem\nKeep DIR/ca-key.pem private: whoever has it can join the cluster.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *name == "" || filepath.Base(*name) != *name {
		return badInput("--name is required (a file name, no directories)")
	}
	if *client && pki.ReservedClientName(*name) {
		return badInput("--name %s: no client may be named %s or %s (they own the jobs of a node's own process and of the HTTP operator); choose another name",
			*name, pki.LocalOwner, pki.OperatorOwner)
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return badInput("--dir: %v", err)
	}
	caCert, caKey := filepath.Join(*dir, "ca.pem"), filepath.Join(*dir, "ca-key.pem")
	var ca *pki.CA
	var err error
	if _, statErr := os.Stat(caKey); statErr == nil {
		if ca, err = pki.LoadCA(caCert, caKey); err != nil {
			return err
		}
	} else {
		if ca, err = pki.NewCA("didnmf cluster CA"); err != nil {
			return err
		}
		if err := pki.Write(caKey, ca.KeyPEM, 0o600); err != nil {
			return err
		}
		if err := pki.Write(caCert, ca.CertPEM, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s and %s (new certificate authority)\n", caCert, caKey)
	}
	role := pki.RolePeer
	if *client {
		role = pki.RoleClient
	}
	certPEM, keyPEM, err := ca.IssueRole(*name, splitList(*hosts), role)
	if err != nil {
		return badInput("%v", err)
	}
	cert, key := filepath.Join(*dir, *name+".pem"), filepath.Join(*dir, *name+"-key.pem")
	if err := pki.Write(key, keyPEM, 0o600); err != nil {
		return badInput("%v (remove it to make a new one)", err)
	}
	if err := pki.Write(cert, certPEM, 0o644); err != nil {
		return badInput("%v", err)
	}
	fmt.Fprintf(stdout, "wrote %s and %s (%s) for %s\n", cert, key, role, *hosts)
	return nil
}

package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/didnmf/didnmf/internal/httpapi"
)

// cmdDashboard prints, for the holder of the cluster secret, the login URL of every member
// that serves its dashboard (serve --http), as serve printed it when it started: the URL
// carries the operator token derived from the secret, or with --client NAME a token that sees
// only NAME's jobs.
func cmdDashboard(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dashboard", flag.ContinueOnError)
	var cf clientFlags
	cf.register(fs)
	client := fs.String("client", "", "print a client token for `NAME` instead of the operator's: it sees the cluster and only NAME's jobs, and submits as NAME")
	tokenOnly := fs.Bool("token", false, "print only the token (for Authorization: Bearer TOKEN), not the URLs")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf dashboard --cluster IP:PORT [--client NAME] [flags]\n\n"+
			"prints the login URL of each member's dashboard and HTTP API (serve --http), with a token derived\n"+
			"from the cluster secret: the operator's (sees and controls every job), or with --client NAME one\n"+
			"that sees only NAME's jobs. Only the secret's holder can make them. A node started with\n"+
			"--http-token-file takes that file's token instead of the operator's derived one.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if cf.cluster == "" && !*tokenOnly {
		return badInput("--cluster is required (or --token to print only the token)")
	}
	if *client != "" {
		if err := httpapi.CheckClientName(*client); err != nil {
			return badInput("--client: %v", err)
		}
	}
	cr, err := cf.sec.credentials(stderr, false)
	if err != nil {
		return err
	}
	if cr.secret == nil {
		return badInput("dashboard tokens derive from the cluster secret, which this command did not find (--secret-file): with certificate files, log in with a client certificate, or give serve --http-token-file and use that file's token")
	}
	token := httpapi.OperatorToken(cr.secret)
	if *client != "" {
		token = httpapi.ClientToken(cr.secret, *client)
	}
	if *tokenOnly {
		fmt.Fprintln(stdout, token)
		return nil
	}
	c, err := connect(cf.cluster, &cf.sec, cf.bind, stderr)
	if err != nil {
		return err
	}
	defer c.Close()
	n := 0
	for _, m := range c.Members.Workers() {
		if m.Meta.HTTP == "" {
			continue
		}
		fmt.Fprintf(stdout, "%s\t%s/login?token=%s\n", m.Name, trimSlash(m.Meta.HTTP), token)
		n++
	}
	if n == 0 {
		return badInput("no member of the cluster at %s serves a dashboard: start members with didnmf serve --http IP:PORT", cf.cluster)
	}
	return nil
}

// trimSlash drops the trailing slash a base URL may have.
func trimSlash(u string) string {
	if len(u) > 0 && u[len(u)-1] == '/' {
		return u[:len(u)-1]
	}
	return u
}

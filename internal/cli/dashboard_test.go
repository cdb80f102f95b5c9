package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/didnmf/didnmf/internal/browsertest"

	"github.com/chromedp/chromedp"

	"github.com/didnmf/didnmf/internal/httpapi"
)

// TestDashboardAgainstACluster drives headless Chromium against five `didnmf serve --http`
// processes (five, so that the job keeps a majority of its nodes when two of them die), as a person would: log in with the URL node a printed, see the members, follow
// a running job's iteration, kill -9 a node holding some of its shards and see the node
// marked dead and the job's failure and recovery on its timeline (the screenshot the issue's
// closing note shows: $DIDNMF_SCREENSHOT, and its 390-px twin), then kill the page's own node
// and see the page say so and offer another member's dashboard, while the job runs on.
func TestDashboardAgainstACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts node processes and a browser")
	}
	if browsertest.Path() == "" {
		t.Skip("no chromium: apt-get install -y chromium (Debian), or set DIDNMF_CHROMIUM to a Chromium or Chrome binary")
	}
	isolateGossip(t)
	root := t.TempDir()
	// Every shard sleeps 20 ms an iteration: the job runs long enough to watch and to lose a
	// node mid-way.
	nodes := startWebCluster(t, root, []string{"a", "b", "c", "d", "e"}, "--chaos-delay", "20ms")
	a := nodes[0]
	op := api{t: t, base: a.base, token: a.token}

	br := browsertest.New(t)
	br.Timeout = 60 * time.Second // memberlist takes seconds to declare a node dead
	br.Do("log in", chromedp.Navigate(a.loginURL))
	br.Wait("5 members listed", `document.querySelectorAll('#members tbody tr[data-member]').length === 5 &&
		[...document.querySelectorAll('#members tbody tr[data-member]')].every(r => r.dataset.state === 'alive')`,
		`document.getElementById('members').innerText`)
	if got := br.Eval(`location.pathname + location.search`); got != "/" {
		t.Errorf("after the login the address bar shows %q (the token must leave it)", got)
	}

	// A long detached job (it must outlive node a, whose page submitted nothing: a job
	// attached to a's HTTP service would end with a), checkpointed often so that a recovery
	// has a checkpoint to roll back to.
	shared := filepath.Join(root, "long")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	id := op.submit(fmt.Sprintf(`{"input":"synthetic:m=6,n=30000,k=3,seed=4","rank":3,"shards":10,"max_iter":4000,"tol":0,"checkpoint_every":5,"out_shared":%q}`, shared))
	br.Do("open the job", chromedp.Navigate(a.base+"/#job="+id))
	br.Wait("the job's detail", `document.getElementById('detail-iteration') && +document.getElementById('detail-iteration').dataset.iteration > 0`,
		`document.body.innerText`)
	first, _ := strconv.Atoi(br.Eval(`document.getElementById('detail-iteration').dataset.iteration`))
	br.Wait("the iteration advances", `+document.getElementById('detail-iteration').dataset.iteration > `+strconv.Itoa(first+10),
		`document.getElementById('detail-iteration').dataset.iteration`)

	// The victim: a node holding shards of the job that neither coordinates it nor serves the
	// page; c when it can be. The page's own node goes next, and b's dashboard (another when
	// b is the victim) is the one the page must offer then.
	var job httpapi.JobView
	waitFor(t, "a checkpoint of the job", 60*time.Second, func() bool {
		op.get("/api/v1/jobs/"+id, &job)
		return job.Checkpoints > 0 && len(job.ShardNodes) == 10
	}, func() string { return fmt.Sprintf("%+v", job) })
	var victim, survivor *webNode
	for _, n := range []*webNode{nodes[2], nodes[3], nodes[4], nodes[1]} {
		if n.Actor != job.Coordinator && slices.Contains(job.ShardNodes, n.Actor) {
			victim = n
			break
		}
	}
	if victim == nil {
		t.Fatalf("no node but a and the coordinator %s holds shards: %v", job.Coordinator, job.ShardNodes)
	}
	survivor = nodes[1]
	if victim == nodes[1] {
		survivor = nodes[2]
	}
	t.Logf("job %s: coordinator %s, shards %v; killing %s (%s)", id, job.Coordinator, job.ShardNodes, victim.name, victim.Actor)
	victim.Kill()
	br.Wait(victim.name+" marked dead", `document.querySelector('#members tr[data-member="`+victim.name+`"]').dataset.state === 'dead'`,
		`document.getElementById('members').innerText`)
	br.Wait("failure and recovery on the timeline", `document.querySelector('#timeline svg [data-kind=recovered]') &&
		(document.querySelector('#timeline svg [data-kind=failure]') || document.querySelector('#timeline svg [data-kind=takeover]'))`,
		`document.getElementById('timeline').innerHTML.slice(0, 2000)`)
	after, _ := strconv.Atoi(br.Eval(`document.getElementById('detail-iteration').dataset.iteration`))
	br.Wait("the iteration advances after the recovery", `+document.getElementById('detail-iteration').dataset.iteration > `+strconv.Itoa(after+5),
		`document.getElementById('detail-iteration').dataset.iteration`)
	desktop, phone := browsertest.ScreenshotPaths(t)
	br.Screenshot(desktop)
	br.Do("390 px", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	br.Wait("chart redrawn for 390 px", `document.querySelector('#chart svg') && +document.querySelector('#chart svg').getAttribute('width') <= 390`,
		`document.querySelector('#chart').innerHTML.slice(0, 300)`)
	br.Screenshot(phone)
	br.Do("back to desktop", chromedp.EmulateViewport(1280, 900))

	// The page's own node dies: the page says so and offers the surviving member's dashboard.
	a.Kill()
	br.Wait("node a went away", `!document.getElementById('away').hidden &&
		document.querySelector('#away-others a[data-member="`+survivor.name+`"]') !== null`,
		`document.getElementById('away').innerText`)
	if got := br.Eval(`document.querySelector('#away-others a[data-member="` + survivor.name + `"]').getAttribute('href')`); got != survivor.base && got != survivor.base+"/" {
		t.Errorf("the away banner links %s to %q, want its dashboard %s", survivor.name, got, survivor.base)
	}
	if got := br.Eval(`document.querySelector('#away-others a[data-member="` + victim.name + `"]') === null`); got != "true" {
		t.Errorf("the away banner offers the dead %s", victim.name)
	}
	br.Check()

	// Following the link: the other member's page (a session of its own: the login form,
	// unless the browser's session cookie, shared by every port of a host, is one it made),
	// then its login URL shows the job there.
	link := br.Eval(`document.querySelector('#away-others a[data-member="` + survivor.name + `"]').href`)
	br.Do("follow the away banner's link", chromedp.Navigate(link))
	br.Wait(survivor.name+"'s page", `location.origin === '`+survivor.base+`' && document.readyState === 'complete'`, `location.href`)
	t.Logf("%s's page before its login: %.200q", survivor.name, br.Eval(`document.body.innerText`))
	br.Do("log in to "+survivor.name, chromedp.Navigate(survivor.loginURL))
	br.Wait("the job on "+survivor.name+"'s page", `document.getElementById('node-name').textContent === '`+survivor.name+`' &&
		document.querySelector('tr[data-job="`+id+`"]') !== null &&
		document.querySelector('#members tr[data-member="a"]').dataset.state !== 'alive'`,
		`document.body.innerText.slice(0, 2000)`)

	// The job lives on: the survivor's API shows it running on (its iteration advancing) or
	// done.
	other := api{t: t, base: survivor.base, token: survivor.token}
	var seen int64 = -1
	waitFor(t, "the job running on or done, through "+survivor.name+"'s API", 90*time.Second, func() bool {
		code, b := other.do("GET", "/api/v1/jobs/"+id, "")
		if code != http.StatusOK {
			return false
		}
		var j httpapi.JobView
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		job = j
		switch {
		case j.State == "done":
			return true
		case j.State == "failed" || j.State == "canceled":
			t.Fatalf("the job ended %s after node a died: %+v", j.State, j.Error)
		case j.State == "running" && seen >= 0 && j.Iteration > seen:
			return true
		case j.State == "running":
			if seen < 0 {
				seen = j.Iteration
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%+v", job) })
	t.Logf("after a died: job %s %s at iteration %d, coordinator %s, %d recoveries", id, job.State, job.Iteration, job.Coordinator, job.Recoveries)
}

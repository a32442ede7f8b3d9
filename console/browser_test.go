package console_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/logd-dev/logd/logdtest"
)

// The browser tests drive the console in a real headless Chromium
// (Debian's chromium package, which scripts/test-tools.sh installs). One
// browser serves every test of the binary; each test opens its own tab
// against its own logd node (logdtest: a real node in process).

var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel context.CancelFunc
	browserErr    error
)

// chromiumPath finds the browser; without it the browser tests skip,
// except under CI=true, where they fail.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (scripts/test-tools.sh installs it)")
	}
	t.Skip("no chromium on PATH; run scripts/test-tools.sh")
	return ""
}

// browser returns the shared browser's context, starting it on first use.
func browser(t *testing.T) context.Context {
	path := chromiumPath(t)
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path),
			chromedp.NoSandbox, // tests run as root
			chromedp.DisableGPU,
			chromedp.Flag("headless", "new"),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("no-first-run", true),
			chromedp.WindowSize(1280, 800),
		)
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		browserCtx = ctx
		browserCancel = func() { cancel(); cancelAlloc() }
		browserErr = chromedp.Run(ctx) // starts the browser
	})
	if browserErr != nil {
		t.Fatalf("start chromium: %v", browserErr)
	}
	return browserCtx
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browserCancel != nil {
		browserCancel()
	}
	os.Exit(code)
}

// page is one browser tab on one node's console. It records what the
// page logs as errors (exceptions, console.error, CSP violations, failed
// loads); Cleanup fails the test if there are any, unless the test took
// them with takeErrors.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string // the node's URL

	mu   sync.Mutex
	errs []string
}

// pageTimeout bounds every step of a browser test.
const pageTimeout = 20 * time.Second

func newPage(t *testing.T, node *logdtest.Server) *page {
	t.Helper()
	return newPageAt(t, node.URL())
}

// newPageAt is newPage for the console served at base (a server.Server
// over a stand-in backend, say).
func newPageAt(t *testing.T, base string) *page {
	t.Helper()
	tab, cancel := chromedp.NewContext(browser(t))
	p := &page{t: t, ctx: tab, base: base}
	chromedp.ListenTarget(tab, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.addErr("exception: " + ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				p.addErr("console." + string(ev.Type) + ": " + strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.LevelError {
				p.addErr(fmt.Sprintf("log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err := chromedp.Run(tab, log.Enable(), runtime.Enable()); err != nil {
		cancel()
		t.Fatalf("open a tab: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if errs := p.takeErrors(); len(errs) > 0 {
			t.Errorf("the browser logged errors:\n%s", strings.Join(errs, "\n"))
		}
	})
	return p
}

func (p *page) addErr(s string) {
	p.mu.Lock()
	p.errs = append(p.errs, s)
	p.mu.Unlock()
}

// takeErrors returns the errors logged so far and forgets them.
func (p *page) takeErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := p.errs
	p.errs = nil
	return errs
}

// run runs actions with the step timeout.
func (p *page) run(actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(p.ctx, pageTimeout)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// must runs actions and fails the test if they fail, saying what step.
func (p *page) must(step string, actions ...chromedp.Action) {
	p.t.Helper()
	if err := p.run(actions...); err != nil {
		p.fail(step, err)
	}
}

// fail ends the test with what step failed; a step that timed out shows
// the page's text too.
func (p *page) fail(step string, err error) {
	p.t.Helper()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (page text: %q)", err, p.text("body"))
	}
	p.t.Fatalf("%s: %v", step, err)
}

// open loads the console at route (a hash route such as "/topics") and
// waits for the page to render: #view is empty until the console's first
// render (it asks who the caller is first), then says "Loading…" until
// the page replaces it.
func (p *page) open(route string) {
	p.t.Helper()
	p.must("open "+route,
		chromedp.Navigate(p.base+"/ui/#"+route),
		chromedp.WaitReady("#view", chromedp.ByQuery),
		pollJS(`(() => { const t = document.querySelector('#view').textContent; return t !== '' && !t.startsWith('Loading'); })()`),
	)
}

// pollJS waits until the expression js is true. An exception counts as
// false: a predicate that reads an element the page has not rendered yet
// (querySelector gives null) waits for it instead of failing the test.
func pollJS(js string) chromedp.Action {
	return chromedp.Poll("(() => { try { return !!("+js+"); } catch (e) { return false; } })()", nil,
		chromedp.WithPollingTimeout(pageTimeout))
}

// waitText waits until the element sel's text contains want.
func (p *page) waitText(sel, want string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, want)
	if err := p.run(chromedp.Poll(js, nil, chromedp.WithPollingTimeout(pageTimeout))); err != nil {
		p.t.Fatalf("wait for %q in %s: %v (text: %q)", want, sel, err, p.text(sel))
	}
}

// text returns the text of the element sel ("" if there is none).
func (p *page) text(sel string) string {
	var s string
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	_ = chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel), &s))
	return s
}

// eval evaluates a JavaScript expression into out.
func (p *page) eval(js string, out any) {
	p.t.Helper()
	p.must("evaluate "+js, chromedp.Evaluate(js, out))
}

// click clicks the first element matching sel once it is visible.
func (p *page) click(sel string) {
	p.t.Helper()
	p.mustFresh("click "+sel, chromedp.Click(sel, chromedp.ByQuery, chromedp.NodeVisible))
}

// mustFresh runs actions like must, again when the page re-rendered
// between chromedp finding an element and acting on it (a save re-reads
// the topic and redraws its table), which leaves chromedp holding a node
// that is gone. It tries a bounded number of times.
func (p *page) mustFresh(step string, actions ...chromedp.Action) {
	p.t.Helper()
	var err error
	for try := 0; try < 5; try++ {
		if err = p.run(actions...); err == nil || !staleNode(err) {
			break
		}
	}
	if err != nil {
		p.fail(step, err)
	}
}

// staleNode reports whether err is the browser saying a node chromedp
// found has since left the document.
func staleNode(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") ||
		strings.Contains(msg, "Node is detached") ||
		strings.Contains(msg, "No node with given id")
}

// fill sets an input's value as typing would (input events fire). It
// empties the input by script: chromedp.SetValue cannot set "" (it reads
// the empty answer back as a failure).
func (p *page) fill(sel, value string) {
	p.t.Helper()
	clear := fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, sel)
	var ok bool
	actions := []chromedp.Action{chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Evaluate(clear, &ok)}
	if value != "" {
		actions = append(actions, chromedp.SendKeys(sel, value, chromedp.ByQuery))
	}
	// A re-render between the clear and the keys (a page's refresh makes
	// the input anew, with its default) leaves the default and the keys
	// ("3" then "4": "34"): fill again until the input holds the value.
	read := fmt.Sprintf(`document.querySelector(%q).value`, sel)
	for try := 0; ; try++ {
		p.mustFresh("fill "+sel, actions...)
		var got string
		p.eval(read, &got)
		if got == value {
			return
		}
		if try == 4 {
			p.t.Fatalf("fill %s: it holds %q after 5 tries, want %q", sel, got, value)
		}
	}
}

// count returns how many elements match sel.
func (p *page) count(sel string) int {
	p.t.Helper()
	var n int
	p.eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, sel), &n)
	return n
}

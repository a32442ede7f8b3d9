package outbox

// Points a test may stop a relay at.
const (
	BeforeProduce = beforeProduce
	AfterProduce  = afterProduce
)

// Point is a place a test stops a relay at.
type Point = point

// SetHook makes r call f at each point; an error from f stops the batch
// there, as a crash would.
func SetHook(r *Relay, f func(Point) error) { r.hook = f }

// DropKeys makes r produce without idempotency keys: the protection
// switched off.
func DropKeys(r *Relay) { r.noKeys = true }

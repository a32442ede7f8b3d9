// Package membudget is a memory budget of bytes in flight, first of all
// the node's budget for answers being built and sent: a Fetch's records,
// a Kafka Fetch's batches. Each answer is charged before it is built, for
// the most it may reach, and the charge is trimmed to what was built,
// then released once the answer is written (docs/architecture.md, "Memory
// budgets"). The Connect API and the Kafka listener draw from one Budget,
// so the answers of both front ends together stay within it. The Kafka
// listener's request budget is one too, whose readers wait without bound.
//
// Invariants:
//   - The bytes charged never exceed the limit: a charge larger than the
//     whole budget is cut to the limit (an answer is bounded by the front
//     end's own cap long before), and a charge that does not fit waits, at
//     most as long as its caller asked, in arrival order, then fails with
//     *FullError having charged nothing.
//   - With a per-key cap, one key (a principal) holds at most that much:
//     many streams of one client cannot take the whole budget from the
//     others. A waiter held back only by its key's cap lets later ones
//     pass.
//   - A Charge is owned by one goroutine; Release is idempotent.
package membudget

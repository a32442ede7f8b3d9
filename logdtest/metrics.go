package logdtest

import (
	"fmt"

	dto "github.com/prometheus/client_model/go"
)

// Metric returns the sum of the server's samples of the metric called
// name (a counter or gauge, e.g. "logd_group_fenced_commits_total") whose
// labels include the given name-value pairs; 0 if there is none.
func (s *Server) Metric(name string, labelPairs ...string) (float64, error) {
	if len(labelPairs)%2 != 0 {
		return 0, fmt.Errorf("metric %s: labels must be name-value pairs, got %q", name, labelPairs)
	}
	families, err := s.reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("gather metrics: %w", err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labelPairs) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			case m.GetUntyped() != nil:
				sum += m.GetUntyped().GetValue()
			default:
				return 0, fmt.Errorf("metric %s is neither a counter nor a gauge", name)
			}
		}
	}
	return sum, nil
}

// hasLabels reports whether m carries every name-value pair.
func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

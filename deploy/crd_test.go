package deploy

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The prometheus-operator kinds the chart renders, with the fields of
// monitoring.coreos.com/v1 the chart writes (names and places as in the
// operator's CRDs). Decoded strictly, so a field the chart writes that
// is not here, or not where it is here, fails; the operator's module is
// not required for it (it brings controller-runtime and the
// apiextensions server with it).

type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string `json:"jobLabel,omitempty"`
		NamespaceSelector struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
			Relabelings   []struct {
				Action       string   `json:"action,omitempty"`
				SourceLabels []string `json:"sourceLabels,omitempty"`
				Regex        string   `json:"regex,omitempty"`
				TargetLabel  string   `json:"targetLabel,omitempty"`
				Replacement  *string  `json:"replacement,omitempty"`
			} `json:"relabelings,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func (m *serviceMonitor) validate() error {
	if m.Name == "" {
		return errors.New("no metadata.name")
	}
	if len(m.Spec.Selector.MatchLabels) == 0 && len(m.Spec.Selector.MatchExpressions) == 0 {
		return errors.New("spec.selector selects every Service")
	}
	if len(m.Spec.Endpoints) == 0 {
		return errors.New("no spec.endpoints")
	}
	for i, e := range m.Spec.Endpoints {
		if e.Port == "" {
			return fmt.Errorf("endpoint %d names no port", i)
		}
		for j, r := range e.Relabelings {
			if r.Action == "replace" && (r.TargetLabel == "" || r.Replacement == nil) {
				return fmt.Errorf("endpoint %d relabeling %d: replace needs targetLabel and replacement", i, j)
			}
		}
	}
	return nil
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleFile `json:"spec"`
}

// ruleFile is a Prometheus rule file, which is also a PrometheusRule's
// spec.
type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Expr        string            `json:"expr"`
			For         string            `json:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func (r *prometheusRule) validate() error {
	if r.Name == "" {
		return errors.New("no metadata.name")
	}
	if len(r.Spec.Groups) == 0 {
		return errors.New("no spec.groups")
	}
	for _, g := range r.Spec.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			return fmt.Errorf("group %q: a name and rules are required", g.Name)
		}
		for i, rule := range g.Rules {
			if (rule.Alert == "") == (rule.Record == "") || rule.Expr == "" {
				return fmt.Errorf("group %q rule %d: one of alert or record, and expr, are required", g.Name, i)
			}
		}
	}
	return nil
}

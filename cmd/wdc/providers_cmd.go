package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/wdc-dev/wdc/cmd/internal/views"
	"github.com/wdc-dev/wdc/engine/plan"
	"github.com/wdc-dev/wdc/providers"
)

// providersFormatVersion is the format_version of the providers document
// (docs/json.md, docs/schema/providers.schema.json).
const providersFormatVersion = "1.0"

// ProvidersCmd lists the provider registry: every provider this wdc has,
// the planned ones it does not, and the external pseudo-provider, with
// what each supports and which pools of the configuration use it. It
// never opens the state.
type ProvidersCmd struct {
	JSON bool `name:"json" help:"Print the providers document (docs/json.md) instead of a table."`
}

// providersDoc is the document `wdc providers --json` prints.
type providersDoc struct {
	FormatVersion string               `json:"format_version"`
	WDCVersion    string               `json:"wdc_version"`
	Configuration providersConfigJSON  `json:"configuration"`
	Providers     []providerJSON       `json:"providers"`
	Summary       providersSummaryJSON `json:"summary"`
}

type providersConfigJSON struct {
	Dir    string `json:"dir"`
	Loaded bool   `json:"loaded"`
	Note   string `json:"note,omitempty"`
}

type providerJSON struct {
	Name                 string             `json:"name"`
	Source               *string            `json:"source"`
	Status               string             `json:"status"`
	Pseudo               bool               `json:"pseudo"`
	Summary              string             `json:"summary"`
	Capabilities         *capabilitiesJSON  `json:"capabilities"`
	Pools                []string           `json:"pools"`
	ClusterWritesEnabled bool               `json:"cluster_writes_enabled"`
	Error                *contractErrorJSON `json:"error,omitempty"`
}

type capabilitiesJSON struct {
	Render        bool `json:"render"`
	DryRun        bool `json:"dry_run"`
	ClusterWrites bool `json:"cluster_writes"`
}

type contractErrorJSON struct {
	Rule    string `json:"rule"`
	Detail  string `json:"detail"`
	Message string `json:"message"`
}

type providersSummaryJSON struct {
	Available int `json:"available"`
	Planned   int `json:"planned"`
	Invalid   int `json:"invalid"`
}

// Run prints the listing of the registry. It exits 1, after printing it,
// when a registered provider fails its contract (each error on stderr).
func (c *ProvidersCmd) Run(e *env) error { return c.list(e, providers.List()) }

// list prints the listing of the registry entries given.
func (c *ProvidersCmd) list(e *env, entries []providers.Entry) error {
	dir, err := e.configDir()
	if err != nil {
		return err
	}
	cfg, noConfig := e.loadOptionalConfig(dir)
	if noConfig != "" {
		cfg = nil
	}
	doc := newProvidersDoc(plan.ListProviders(entries, cfg), dir, noConfig)
	if c.JSON {
		err = views.WriteJSON(e.stdout, doc)
	} else {
		err = renderProviders(e.stdout, doc)
	}
	if err != nil {
		return err
	}
	if doc.Summary.Invalid == 0 {
		return nil
	}
	for _, p := range doc.Providers {
		if p.Error != nil {
			fmt.Fprintf(e.stderr, "wdc: error: %s\n", p.Error.Message)
		}
	}
	return errExit{1}
}

func newProvidersDoc(list []plan.ProviderEntry, dir, noConfig string) *providersDoc {
	doc := &providersDoc{
		FormatVersion: providersFormatVersion,
		WDCVersion:    Version,
		Configuration: providersConfigJSON{Dir: dir, Loaded: noConfig == "", Note: noConfig},
		Providers:     make([]providerJSON, 0, len(list)),
	}
	for _, p := range list {
		j := providerJSON{
			Name:                 p.Info.Name,
			Status:               string(p.Status),
			Pseudo:               p.Pseudo,
			Summary:              p.Info.Summary,
			Pools:                append([]string{}, p.Pools...),
			ClusterWritesEnabled: p.ClusterWritesEnabled,
		}
		switch p.Status {
		case providers.StatusPlanned:
			doc.Summary.Planned++
		case providers.StatusInvalid:
			doc.Summary.Invalid++
		default:
			doc.Summary.Available++
		}
		if p.Status != providers.StatusPlanned {
			source := p.Info.Source
			caps := p.Info.Capabilities
			j.Source = &source
			j.Capabilities = &capabilitiesJSON{Render: caps.Render, DryRun: caps.DryRun, ClusterWrites: caps.ClusterWrites}
		}
		if p.Err != nil {
			j.Error = &contractErrorJSON{Rule: string(p.Err.Rule), Detail: p.Err.Detail, Message: p.Err.Error()}
		}
		doc.Providers = append(doc.Providers, j)
	}
	return doc
}

// renderProviders prints the listing as a table, then why pools are not
// shown when there is no configuration to take them from.
func renderProviders(w io.Writer, doc *providersDoc) error {
	tw := views.NewTable(w)
	fmt.Fprintln(tw, "NAME\tSOURCE\tSTATUS\tRENDER\tDRY RUN\tCLUSTER WRITES\tPOOLS\tSUMMARY")
	for _, p := range doc.Providers {
		source, status, render, dryRun, clusterWrites := "-", p.Status, "-", "-", "-"
		switch {
		case p.Status == string(providers.StatusPlanned):
			status = "planned, not built"
		case !p.Capabilities.ClusterWrites:
			clusterWrites = "not applicable"
		case !doc.Configuration.Loaded:
		case p.ClusterWritesEnabled:
			clusterWrites = "enabled"
		default:
			clusterWrites = "disabled"
		}
		if p.Source != nil {
			source = *p.Source
		}
		if c := p.Capabilities; c != nil {
			render, dryRun = yesNo(c.Render), yesNo(c.DryRun)
		}
		pools := "-"
		if len(p.Pools) > 0 {
			pools = strings.Join(p.Pools, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, source, status, render, dryRun, clusterWrites, pools, p.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if note := doc.Configuration.Note; note != "" {
		_, err := fmt.Fprintf(w, "\nPools are not shown: %s.\n", note)
		return err
	}
	return nil
}

// yesNo renders a capability.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

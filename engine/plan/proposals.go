package plan

import (
	"fmt"

	"github.com/wdc-dev/wdc/engine/coordinator"
	"github.com/wdc-dev/wdc/state"
)

// AttachProposals completes a plan rebuilt from a saved plan file with the
// approved proposals it runs, from snap (the state it was made from):
// each run of a proposal gets the proposal and its recorded definition.
// Errors: a proposal the state does not have approved with the definition
// hash the plan recorded.
func AttachProposals(p *Plan, snap *state.Snapshot) error {
	byAddr := map[string]*state.Proposal{}
	for i := range snap.Proposals {
		byAddr[snap.Proposals[i].Address()] = &snap.Proposals[i]
	}
	for i := range p.Tasks {
		tc := &p.Tasks[i]
		if _, ok := coordinator.ProposalID(tc.Address); !ok || tc.Action == ActionCancel {
			continue
		}
		prop := byAddr[tc.Address]
		if prop == nil || !prop.Status.Approved() || prop.DefHash != tc.NewHash {
			return fmt.Errorf("%s is not an approved proposal with the definition the plan recorded: save a new plan", tc.Address)
		}
		def, err := proposalDefinition(*prop)
		if err != nil {
			return err
		}
		tc.Proposal = prop
		p.Definitions[tc.Address] = def
	}
	for i := range snap.Proposals {
		if snap.Proposals[i].Status == state.ProposalPending {
			p.Waiting = append(p.Waiting, snap.Proposals[i])
		}
	}
	return nil
}

// proposalDefinition is the definition a proposal recorded, with its hash.
func proposalDefinition(p state.Proposal) (TaskDefinition, error) {
	d, err := coordinator.ProposalDefinition(p)
	if err != nil {
		return TaskDefinition{}, err
	}
	return TaskDefinition{Definition: d, Hash: p.DefHash}, nil
}

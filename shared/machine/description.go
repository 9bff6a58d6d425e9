package machine

import "fmt"

// MaxDescription is the most bytes a machine's description (its host,
// rack, attributes and resources, as DescriptionSize counts them) may take.
// The description is stored in the slave's one item, and a DynamoDB item
// holds at most 400 KB: this leaves about 100 KB for the rest of it (the
// id, the current state with a message of up to 4,096 characters, the
// attribute names), so that no later change of the slave can outgrow the
// item either.
const MaxDescription = 300 << 10

// DescriptionSize returns the bytes the description of o takes: its host,
// rack and resources, and each attribute's name and value with 4 bytes
// more for its framing, which makes a map of many tiny attributes count
// for what it costs to store.
func (o Observation) DescriptionSize() int {
	n := len(o.Host) + len(o.RackID) + len(o.Resources)
	for k, v := range o.Attributes {
		n += len(k) + len(v) + 4
	}
	return n
}

// CheckSize returns an error when the description of o is over
// MaxDescription: such an entry of a report cannot be stored and is
// skipped, as an unreadable one is (docs/behaviour.md "Machine reports").
func (o Observation) CheckSize() error {
	if n := o.DescriptionSize(); n > MaxDescription {
		return fmt.Errorf("machine %s: description of %d bytes, over the %d a machine may have", o.ID, n, MaxDescription)
	}
	return nil
}

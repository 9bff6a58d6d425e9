package dynamo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// receiptScope starts the slaveId of a keyed receipt. Slave ids never start
// with '#' (machine.ValidateID), so no slave's items share its partition.
const receiptScope = "#request:"

// scopedReceipt returns the item key of the receipt of a client's request:
// the caller and its key, hashed together (the caller's id is
// length-prefixed, so no two pairs hash alike by running into each other).
// Each request gets a partition of its own, so one busy caller is spread
// like any other load.
func scopedReceipt(caller, key string) (slaveID, requestKey string) {
	h := sha256.New()
	_ = binary.Write(h, binary.BigEndian, uint64(len(caller)))
	h.Write([]byte(caller))
	h.Write([]byte(key))
	sum := hex.EncodeToString(h.Sum(nil))
	return receiptScope + sum, sum
}

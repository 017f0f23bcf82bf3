package index

// SetCheckpointDocs lowers the number of logged documents that trigger a
// checkpoint, so that tests reach it with few documents.
func SetCheckpointDocs(ix *Index, n int) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.checkpointDocs = n
}

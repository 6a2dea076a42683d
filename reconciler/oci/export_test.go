package oci

// AgeListeners makes every NLB's listeners as read older than listenerTTL,
// so the next backend set read reads them again.
func AgeListeners(c *Client) {
	c.listeners.mu.Lock()
	defer c.listeners.mu.Unlock()
	for lb, r := range c.listeners.read {
		r.at = r.at.Add(-2 * listenerTTL)
		c.listeners.read[lb] = r
	}
}

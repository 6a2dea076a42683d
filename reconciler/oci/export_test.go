package oci

// AgeNLBReads makes every NLB's read older than nlbTTL, so the next
// backend set read or work request listing reads the NLB again.
func AgeNLBReads(c *Client) {
	c.nlbs.mu.Lock()
	defer c.nlbs.mu.Unlock()
	for lb, r := range c.nlbs.read {
		r.at = r.at.Add(-2 * nlbTTL)
		c.nlbs.read[lb] = r
	}
}

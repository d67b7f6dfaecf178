"""What the inputs say about the cluster's network: kube-proxy configurations, kubeadm, CNI
configurations and component flags, each read into plain records (`network_settings`);
`network_readers` picks the reader of each document.
"""

// placeholder: implemented by the reference work in progress
